package starlib_test

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/aml-go/aml/starlib/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// goldenDir holds the golden cases, relative to the starlib package.
const goldenDir = "../testdata/eval"

// TestGolden runs the golden cases of testdata/eval with the harness of
// `aml test` (package golden documents test mode and the golden format):
// every testdata/eval/NAME.star with a NAME.golden beside it runs with
// entry main and its record must equal NAME.golden. With -update the
// records are written to the golden files instead:
//
//	go test ./starlib -run TestGolden -update
//
// A case sets its provider and limits with configure() in the .star
// itself; leading "# env: KEY=VALUE" comments set what env() sees, and
// "# test: no-default-agent" keeps agents without a provider failing.
func TestGolden(t *testing.T) {
	tests, err := golden.Find([]string{goldenDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatalf("no golden cases in %s", goldenDir)
	}
	checkGoldens(t, tests, "go test ./starlib -run TestGolden -update rewrites the golden files")
}

// checkGoldens runs each test as aml test does, in parallel subtests;
// hint says how to rewrite a golden file that differs.
func checkGoldens(t *testing.T, tests []golden.Test, hint string) {
	for _, test := range tests {
		test.Extensions = allExtensions
		t.Run(test.Name, func(t *testing.T) {
			t.Parallel()
			res := golden.Check(t.Context(), test, *update, 30*time.Second)
			if !res.OK {
				t.Errorf("%s\n(%s)", res.Detail, hint)
			}
		})
	}
}

// TestExampleGoldens runs aml test over examples/, as a newcomer would
// (aml test examples): every example with a golden file beside it does
// what its golden records, and one that needs a credential or a service
// fails before anything runs, saying what to set.
func TestExampleGoldens(t *testing.T) {
	dir := filepath.Join("..", "examples")
	tests, err := golden.Find([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 10 {
		t.Fatalf("only %d examples with golden files in %s", len(tests), dir)
	}
	checkGoldens(t, tests, "aml test -update examples rewrites the golden files")
}
