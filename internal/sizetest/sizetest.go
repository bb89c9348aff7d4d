// Package sizetest marks the tests whose size is their point: a
// million-entry manifest, twenty thousand agent sessions. Under the race
// detector such a test takes minutes of one goroutine's work that the
// detector has nothing to say about (the same code's concurrency is
// race-tested by the small tests beside it), so it skips there, saying
// how it runs, and .ci/run runs the marked tests without -race
// (TestCIRunsEveryMarkedTest holds .ci/run's list to the marks).
package sizetest

import "testing"

// Race reports whether the test binary was built with -race.
const Race = race

// SkipUnderRace skips t when the binary was built with -race, naming the
// command that runs it without; it does nothing otherwise. Call it first
// in the test.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if Race {
		t.Skipf("a size test: without -race it takes seconds, with it minutes, and the detector finds nothing in one goroutine's work; .ci/run runs it without -race (go test -run '^%s$' in this package)", t.Name())
	}
}

// Test is one marked test: its package's directory, relative to the
// module's root ("./temporal"), and its name.
type Test struct{ Dir, Name string }
