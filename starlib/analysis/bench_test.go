package analysis_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aml-go/aml/starlib/analysis"
)

// megabyte returns a workflow of at least 1 MiB: many lanes, each an
// agent with system text, a sandboxed script, a follow-up, a name,
// permissions and a timeout, and an entry over a sample of them.
func megabyte() []byte {
	var b strings.Builder
	b.WriteString("load(\"@std/text\", \"dedent\")\n\nconfigure(agent_provider = deterministic_agent(), sandbox_provider = local_sandbox())\n\n")
	n := 0
	for ; b.Len() < 1<<20; n++ {
		fmt.Fprintf(&b, `def lane_%d(topic):
    """Reviews one topic."""
    prompt = dedent("""
        Review the change for %%s.
        Report findings as a list.
    """) %% topic
    return agent(
        prompt,
        system("Be concise."),
        sandbox(script("git diff --stat", shell = "sh", cwd = "src"), access = "read-only"),
        follow_up("Now rank them."),
        name = "lane-%d",
        permissions = {"filesystem": "read-only", "network": False},
        timeout_ms = 60000,
    )

`, n, n)
	}
	b.WriteString("def main():\n    return parallel(")
	for i := 0; i < n; i += 50 {
		fmt.Fprintf(&b, "lane_%d(\"t\"), ", i)
	}
	b.WriteString(")\n")
	return []byte(b.String())
}

// BenchmarkAnalyzeMegabyte is `aml check` on a 1 MiB workflow: every
// check and the lint warnings.
func BenchmarkAnalyzeMegabyte(b *testing.B) {
	src := megabyte()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		f := analysis.Analyze("big.star", src, opts)
		if n := len(errorsOf(f)); n != 0 {
			b.Fatalf("%d errors: %v", n, f.Diagnostics[0])
		}
	}
}
