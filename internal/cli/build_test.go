package cli

import (
	"runtime/debug"
	"testing"

	"github.com/aml-go/aml/internal/testbin"
)

// buildAML builds this command (once per test process), with -race when
// the test binary itself was built with it.
func buildAML(t *testing.T) string {
	t.Helper()
	return buildAMLRace(t, raceEnabled())
}

// buildAMLRace builds this command (see testbin: once per checkout and
// options, shared by the test processes), with -race when race is set.
// Tests must not change the binary or its directory.
func buildAMLRace(t *testing.T, race bool) string {
	t.Helper()
	return testbin.Build(t, "github.com/aml-go/aml/cmd/aml", testbin.Options{Race: race})
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}
