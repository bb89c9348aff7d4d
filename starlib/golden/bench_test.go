package golden

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkAmlTest100 runs the harness over 100 small test files with
// matching goldens: discovery, loading, evaluation with recorded agents,
// rendering and comparison.
func BenchmarkAmlTest100(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{}
	for i := range 100 {
		files[filepath.Join(fmt.Sprintf("group%d", i%10), fmt.Sprintf("case%03d_test.star", i))] = fmt.Sprintf(`# env: N=%d
echo = deterministic_agent(respond = lambda req: "seen: " + req.prompt)

def main():
    return [agent("Review change ", env("N"), provider = echo), " / ", agent("Summarize.", system = "Be brief.")]
`, i)
	}
	write(b, dir, files)
	if sum, err := Run(Options{Paths: []string{dir}, Update: true}); err != nil || sum.Passed != 100 {
		b.Fatalf("writing goldens: %+v, %v", sum, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sum, err := Run(Options{Paths: []string{dir}})
		if err != nil || sum.Passed != 100 || sum.Failed != 0 {
			b.Fatalf("%+v, %v", sum, err)
		}
	}
}
