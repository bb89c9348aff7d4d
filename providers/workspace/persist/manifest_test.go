package persist

import (
	"fmt"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/sizetest"
)

func mustNormalized(t *testing.T) Options {
	o, err := Options{}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestMillionEntryManifest: a folder revision of 1,000,000 entries, in
// directories as a real tree has them, encodes into a manifest that the
// default options parse back whole.
func TestMillionEntryManifest(t *testing.T) {
	sizetest.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("builds a 1,000,000-entry manifest; run without -short")
	}
	const dirs, perDir = 1000, 999
	es := make([]entry, 0, dirs*(perDir+1))
	now := time.Now()
	for d := 0; d < dirs; d++ {
		dir := fmt.Sprintf("module-%04d", d)
		es = append(es, entry{Path: dir, Type: typeDir, Mode: 0o755})
		for f := 0; f < perDir; f++ {
			es = append(es, entry{Path: fmt.Sprintf("%s/file-%04d.go", dir, f), Type: typeFile, Size: 10, Mode: 0o644, ModTime: now,
				SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"})
		}
	}
	if len(es) < 1_000_000 {
		t.Fatalf("built %d entries", len(es))
	}
	data, err := encodeManifest(es)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxManifestBytes {
		t.Fatalf("a %d-entry manifest is %d bytes, above MaxManifestBytes", len(es), len(data))
	}
	got, err := parseManifest(data, mustNormalized(t).limits(FormatFolder))
	if err != nil {
		t.Fatalf("parse a %d-entry, %d-byte manifest: %v", len(es), len(data), err)
	}
	if len(got) != len(es) {
		t.Fatalf("parsed %d entries of %d", len(got), len(es))
	}
	t.Logf("%d entries: a %.0f MB manifest", len(es), float64(len(data))/1e6)
}
