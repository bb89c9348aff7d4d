package cli

import (
	"runtime/debug"
	"testing"
)

func TestVersionString(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-05T08:00:00Z"},
		{Key: "vcs.modified", Value: "false"},
	}
	dirty := append([]debug.BuildSetting{}, vcs...)
	dirty[3].Value = "true"
	for _, c := range []struct {
		name, linked string
		info         *debug.BuildInfo
		want         string
	}{
		{"no build info", "", nil, "(devel)"},
		{"a go install of a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"a release build", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.2.3 (0123456789ab, 2026-12-05T08:00:00Z)"},
		{"a clone", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "(devel) (0123456789ab, 2026-12-05T08:00:00Z)"},
		{"a clone with edits", "", &debug.BuildInfo{Main: debug.Module{Version: ""}, Settings: dirty}, "(devel) (0123456789ab+dirty, 2026-12-05T08:00:00Z)"},
		{"a pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205080000-0123456789ab"}}, "v0.0.0-20261205080000-0123456789ab"},
		{"a stamped pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205080000-0123456789ab+dirty"}, Settings: dirty}, "v0.0.0-20261205080000-0123456789ab+dirty"},
	} {
		if got := versionString(c.linked, c.info); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
