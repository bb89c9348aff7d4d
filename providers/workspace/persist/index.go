package persist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// IndexPath is the storage path of the index, the single publication point
// of a workspace.
const IndexPath = "workspace.json"

// createdAtLayout is JavaScript's Date.prototype.toISOString form.
const createdAtLayout = "2006-01-02T15:04:05.000Z"

// Index is the content of workspace.json. It is plain data: safe for
// concurrent reads, not for concurrent mutation.
type Index struct {
	// Version is the schema version, 1.
	Version int `json:"version"`
	// Current is the id of the revision "current" selects; it is listed.
	Current string `json:"current"`
	// Revisions are the retained revisions, newest first.
	Revisions []Revision `json:"revisions"`
}

// Revision is one immutable published revision.
type Revision struct {
	// ID is a random UUID (any non-empty trimmed path segment is read).
	ID string `json:"id"`
	// Format is FormatArchive or FormatFolder.
	Format string `json:"format"`
	// Path is RevisionPath(ID, Format).
	Path string `json:"path"`
	// CreatedAt is the publication time in the exact ISO-8601 form
	// "2006-01-02T15:04:05.000Z".
	CreatedAt string `json:"createdAt"`
}

// RevisionPath is the storage path of a revision: "revisions/<id>.tar.gz"
// for archives and the prefix "revisions/<id>/" for folders.
func RevisionPath(id, format string) string {
	if format == FormatFolder {
		return "revisions/" + id + "/"
	}
	return "revisions/" + id + ".tar.gz"
}

// Find returns the revision with id, or nil.
func (x *Index) Find(id string) *Revision {
	for i := range x.Revisions {
		if x.Revisions[i].ID == id {
			return &x.Revisions[i]
		}
	}
	return nil
}

// ParseIndex decodes and strictly validates workspace.json: exactly one
// JSON object with only the known fields, version 1, unique non-empty
// trimmed revision ids that are valid path segments, known formats, paths
// equal to RevisionPath, canonical createdAt timestamps, and a listed
// current revision.
func ParseIndex(data []byte) (*Index, error) {
	if len(data) > MaxIndexBytes {
		return nil, fmt.Errorf("index exceeds %d bytes", MaxIndexBytes)
	}
	var x Index
	if err := decodeStrict(data, &x); err != nil {
		return nil, fmt.Errorf("index is not valid JSON: %w", err)
	}
	if err := x.Validate(); err != nil {
		return nil, err
	}
	return &x, nil
}

// Validate checks the rules ParseIndex enforces.
func (x *Index) Validate() error {
	if x.Version != 1 {
		return fmt.Errorf("index version %d is not 1", x.Version)
	}
	seen := make(map[string]bool, len(x.Revisions))
	for i, r := range x.Revisions {
		if err := validateRevisionID(r.ID); err != nil {
			return fmt.Errorf("index revision %d: %w", i, err)
		}
		if seen[r.ID] {
			return fmt.Errorf("index lists revision %q twice", r.ID)
		}
		seen[r.ID] = true
		if r.Format != FormatArchive && r.Format != FormatFolder {
			return fmt.Errorf("index revision %q has unknown format %q", r.ID, r.Format)
		}
		if r.Path != RevisionPath(r.ID, r.Format) {
			return fmt.Errorf("index revision %q has path %q, not %q", r.ID, r.Path, RevisionPath(r.ID, r.Format))
		}
		t, err := time.Parse(createdAtLayout, r.CreatedAt)
		if err != nil || t.UTC().Format(createdAtLayout) != r.CreatedAt {
			return fmt.Errorf("index revision %q has non-canonical createdAt %q", r.ID, r.CreatedAt)
		}
	}
	if x.Current == "" || !seen[x.Current] {
		return fmt.Errorf("index current revision %q is not listed", x.Current)
	}
	return nil
}

// validateRevisionID accepts a non-empty trimmed single path segment.
func validateRevisionID(id string) error {
	if id == "" || strings.TrimSpace(id) != id || strings.Contains(id, "/") || ValidateStoragePath(id) != nil {
		return fmt.Errorf("invalid revision id %q", id)
	}
	return nil
}

// decodeStrict decodes exactly one JSON value without unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// formatCreatedAt renders t in the createdAt form.
func formatCreatedAt(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(createdAtLayout)
}
