package sizetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/sizetest"
)

// TestMarked finds the Test functions that call SkipUnderRace, in every
// package below the root and in no testdata, and refuses a call that no
// test would run.
func TestMarked(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a_test.go", "package a\nfunc TestBig(t *testing.T) { sizetest.SkipUnderRace(t) }\nfunc TestSmall(t *testing.T) {}\n")
	write("b/c/c_test.go", "package c\nfunc TestHuge(t *testing.T) {\n\tsizetest.SkipUnderRace(t)\n}\n")
	write("b/c/c.go", "package c\nfunc f(t any) { sizetest.SkipUnderRace(t) }\n")
	write("testdata/x_test.go", "package x\nfunc TestNot(t *testing.T) { sizetest.SkipUnderRace(t) }\n")
	got, err := sizetest.Marked(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []sizetest.Test{{Dir: "./a", Name: "TestBig"}, {Dir: "./b/c", Name: "TestHuge"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Marked = %+v, want %+v", got, want)
	}
	write("d/d_test.go", "package d\nfunc helper(t *testing.T) { sizetest.SkipUnderRace(t) }\n")
	if _, err := sizetest.Marked(root); err == nil || !strings.Contains(err.Error(), "called in helper, not a Test function") {
		t.Errorf("a call outside a test: %v", err)
	}
}

// TestTheModulesMarks: the module's own marks are Test functions, and
// the size tests this package was made for are among them (a rename
// would otherwise drop them from .ci/run's step without a word).
func TestTheModulesMarks(t *testing.T) {
	got, err := sizetest.Marked("../..")
	if err != nil {
		t.Fatal(err)
	}
	have := map[sizetest.Test]bool{}
	for _, m := range got {
		have[m] = true
	}
	for _, w := range []sizetest.Test{{Dir: "./providers/workspace/persist", Name: "TestMillionEntryManifest"}, {Dir: "./temporal", Name: "TestContinueAsNew20000"}, {Dir: "./lsp", Name: "TestEnormousDocument"}} {
		if !have[w] {
			t.Errorf("%+v is not marked; marked: %+v", w, got)
		}
	}
}

// TestSkipUnderRace: under -race the test skips; without, it goes on.
func TestSkipUnderRace(t *testing.T) {
	ran := false
	t.Run("marked", func(t *testing.T) {
		sizetest.SkipUnderRace(t)
		ran = true
	})
	if ran == sizetest.Race {
		t.Errorf("race %v, and the marked test ran: %v", sizetest.Race, ran)
	}
}
