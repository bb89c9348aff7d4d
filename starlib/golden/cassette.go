package golden

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/journal"
)

// cassette is a journaled run replayed offline: a read-only eval.Journal
// evaluated with EvaluateOptions.Cassette.
type cassette struct {
	effects map[string]*eval.Effect
}

// loadCassette reads the run at path: a run's directory in a journal
// directory, or a journal directory that holds exactly one run.
func loadCassette(path string) (*cassette, error) {
	dir, id := filepath.Dir(path), filepath.Base(path)
	if _, err := os.Stat(filepath.Join(path, "journal.log")); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cassette %s: %w", path, err)
		}
		runs, err := journal.List(path)
		if err != nil {
			return nil, fmt.Errorf("cassette %s: %w", path, err)
		}
		if len(runs) != 1 {
			return nil, fmt.Errorf("cassette %s holds %d runs; name one of them: # cassette: %s/RUN", path, len(runs), path)
		}
		dir, id = path, runs[0].ID
	}
	effects, err := journal.ReadEffects(dir, id)
	if err != nil {
		return nil, fmt.Errorf("cassette %s: %w", path, err)
	}
	c := &cassette{effects: make(map[string]*eval.Effect, len(effects))}
	for _, e := range effects {
		c.effects[e.ID] = e
	}
	return c, nil
}

// Lookup implements eval.Journal.
func (c *cassette) Lookup(id string) *eval.Effect { return c.effects[id] }

// Record implements eval.Journal; a cassette is never written.
func (c *cassette) Record(*eval.Effect) error { return nil }

// Sync implements eval.Journal.
func (c *cassette) Sync() error { return nil }
