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

// IndexVersion is the version of the indexes this package writes: 2,
// whose revisions pin the digest and size of their content. Version 1
// (no pins) is read too.
const IndexVersion = 2

// Index is the content of workspace.json. It is plain data: safe for
// concurrent reads, not for concurrent mutation.
type Index struct {
	// Version is the schema version: IndexVersion, or 1 for an index an
	// earlier version wrote.
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
	// SHA256 (lower-case hex) and Size pin the revision's content: the
	// archive object of an archive revision, the manifest of a folder
	// revision (whose entries pin each file). A load refuses content that
	// does not match them. Every revision a version 2 index adds has
	// them; one carried over from a version 1 index has neither.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// Pinned reports whether the index pins r's content (SHA256 and Size).
func (r *Revision) Pinned() bool { return r.SHA256 != "" }

// PinnedPath is the object whose digest and size the index pins: the
// archive, or the folder revision's manifest.
func (r *Revision) PinnedPath() string {
	if r.Format == FormatFolder {
		return r.Path + "manifest.json"
	}
	return r.Path
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
// JSON object with only the known fields, version 1 or 2, unique
// non-empty trimmed revision ids that are valid path segments, known
// formats, paths equal to RevisionPath, canonical createdAt timestamps,
// pins (a 64-digit lower-case hex SHA-256 with a positive size, or
// neither; none in version 1), and a listed current revision.
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
	if x.Version != 1 && x.Version != IndexVersion {
		return fmt.Errorf("index version %d is not 1 or %d (an index a newer aml wrote?)", x.Version, IndexVersion)
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
		switch {
		case x.Version == 1 && (r.SHA256 != "" || r.Size != 0):
			return fmt.Errorf("index revision %q has pins, which version 1 does not have", r.ID)
		case r.SHA256 == "" && r.Size != 0:
			return fmt.Errorf("index revision %q has a size but no sha256", r.ID)
		case r.SHA256 != "" && !validSHA256(r.SHA256):
			return fmt.Errorf("index revision %q has sha256 %q, not 64 lower-case hex digits", r.ID, r.SHA256)
		case r.SHA256 != "" && r.Size <= 0:
			return fmt.Errorf("index revision %q has size %d, not a positive number of bytes", r.ID, r.Size)
		}
	}
	if x.Current == "" || !seen[x.Current] {
		return fmt.Errorf("index current revision %q is not listed", x.Current)
	}
	return nil
}

// validSHA256 reports whether s is a SHA-256 in lower-case hex.
func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
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
