package filesystem

import (
	"strings"
	"testing"

	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

// TestLongestNamesSave: a file whose name has the longest length a path
// segment may have (255 bytes) saves and restores in both formats; the
// temporary name of its write must not exceed the filesystem's limit.
func TestLongestNamesSave(t *testing.T) {
	for _, format := range persisttest.Formats {
		t.Run(format, func(t *testing.T) {
			s := newStorage(t)
			e := persisttest.NewEnv(t, s, persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
			name := strings.Repeat("n", 255)
			tree := persisttest.Tree{name: {Data: "long", Mode: 0o644}, "d": {Dir: true, Mode: 0o755}, "d/" + name: {Data: "deep", Mode: 0o644}}
			e.SaveTree("ws", tree, 1)
		})
	}
}
