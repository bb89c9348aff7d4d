package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestReleaseConfig holds .goreleaser.yaml and scripts/release.sh, which
// CI runs in snapshot mode, to the same release: the same targets, a
// static, stripped, -trimpath build of ./cmd/aml and ./cmd/aml-full with
// the version linked into main.version, tar.gz archives with the same files, SHA-256
// checksums.
func TestReleaseConfig(t *testing.T) {
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Version int `yaml:"version"`
		Builds  []struct {
			Main    string   `yaml:"main"`
			Binary  string   `yaml:"binary"`
			Env     []string `yaml:"env"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
			Flags   []string `yaml:"flags"`
			Ldflags []string `yaml:"ldflags"`
		} `yaml:"builds"`
		Archives []struct {
			IDs     []string `yaml:"ids"`
			Formats []string `yaml:"formats"`
			Files   []string `yaml:"files"`
		} `yaml:"archives"`
		Checksum struct {
			Name      string `yaml:"name_template"`
			Algorithm string `yaml:"algorithm"`
		} `yaml:"checksum"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	sh := string(script)
	if cfg.Version != 2 || len(cfg.Builds) != 2 || len(cfg.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: want version 2, two builds and one archive: %+v", cfg)
	}
	if !strings.Contains(sh, "for cmd in aml aml-full; do") || !strings.Contains(sh, `-o "$dir/$cmd" "./cmd/$cmd"`) || !strings.Contains(sh, "tar -C \"$dir\" -czf \"$dist/$name.tar.gz\" aml aml-full ") {
		t.Error("scripts/release.sh does not build and archive ./cmd/aml and ./cmd/aml-full")
	}
	if a := cfg.Archives[0]; !slices.Equal(a.IDs, []string{"aml", "aml-full"}) {
		t.Errorf(".goreleaser.yaml archives %v, want both builds", a.IDs)
	}
	for i, name := range []string{"aml", "aml-full"} {
		b := cfg.Builds[i]
		if b.Main != "./cmd/"+name || b.Binary != name {
			t.Errorf("build %d is %s as %s, want ./cmd/%s as %s", i, b.Main, b.Binary, name, name)
		}
		if i > 0 {
			b0 := cfg.Builds[0]
			if !slices.Equal(b.Env, b0.Env) || !slices.Equal(b.Goos, b0.Goos) || !slices.Equal(b.Goarch, b0.Goarch) || !slices.Equal(b.Flags, b0.Flags) || !slices.Equal(b.Ldflags, b0.Ldflags) {
				t.Errorf("the builds of aml and %s differ: %+v, %+v", name, b0, b)
			}
		}
	}
	b := cfg.Builds[0]
	if !slices.Contains(b.Env, "CGO_ENABLED=0") || !strings.Contains(sh, "CGO_ENABLED=0 ") {
		t.Error("the binaries are not static (CGO_ENABLED=0) in both")
	}
	if !slices.Equal(b.Flags, []string{"-trimpath"}) || !strings.Contains(sh, "go build -trimpath ") {
		t.Errorf("flags %v: want -trimpath in both", b.Flags)
	}
	if len(b.Ldflags) != 1 || b.Ldflags[0] != "-s -w -X main.version={{.Version}}" || !strings.Contains(sh, `-ldflags "-s -w -X main.version=$version"`) {
		t.Errorf("ldflags %v: want stripped binaries with the version linked, in both", b.Ldflags)
	}
	for _, os := range b.Goos {
		for _, arch := range b.Goarch {
			if !strings.Contains(sh, os+"/"+arch) {
				t.Errorf("scripts/release.sh does not build %s/%s", os, arch)
			}
		}
	}
	if len(b.Goos)*len(b.Goarch) != 4 || strings.Count(sh, "linux/")+strings.Count(sh, "darwin/") != 4 {
		t.Errorf("want linux and darwin on amd64 and arm64, four targets in both: %v × %v", b.Goos, b.Goarch)
	}
	a := cfg.Archives[0]
	if !slices.Equal(a.Formats, []string{"tar.gz"}) || !strings.Contains(sh, "tar -C") {
		t.Errorf("archives %v: want tar.gz in both", a.Formats)
	}
	for _, f := range a.Files {
		if !strings.Contains(sh, f) {
			t.Errorf("scripts/release.sh does not archive %s", f)
		}
	}
	if cfg.Checksum.Name != "checksums.txt" || cfg.Checksum.Algorithm != "sha256" || !strings.Contains(sh, "sha256sum") || !strings.Contains(sh, "checksums.txt") {
		t.Errorf("checksum %+v: want SHA-256 in checksums.txt in both", cfg.Checksum)
	}
	// The variable the release links must be the one aml version reads.
	if version != "" {
		t.Fatalf("main.version is %q in a test build, want it set only at link time", version)
	}
}
