package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
)

// folderParallelism bounds concurrent object transfers of a folder revision.
const folderParallelism = 8

// manifest is a folder revision's manifest.json.
type manifest struct {
	Version int             `json:"version"`
	Entries []manifestEntry `json:"entries"`
}

// manifestEntry is one manifest entry. Path, type, size and mode are
// required; mtime (Unix milliseconds) and sha256 (hex) are written by this
// package and optional when reading.
type manifestEntry struct {
	// Path is the entry's path; one that is not valid UTF-8 (which JSON
	// cannot hold) is in PathBytes instead, base64-encoded.
	Path      *string `json:"path,omitempty"`
	PathBytes string  `json:"pathBytes,omitempty"`
	Type      *string `json:"type"`
	Size      *int64  `json:"size"`
	Mode      *int64  `json:"mode"`
	MTime     int64   `json:"mtime,omitempty"`
	SHA256    string  `json:"sha256,omitempty"`
}

// manifestPath and objectPath locate a folder revision's objects: a file
// is stored under files/<its path>, or, when its path cannot be an object
// key everywhere (not valid UTF-8, a control character, which S3 listings
// cannot carry in XML, a backslash, which S3-compatible services take for
// a separator, or a key longer than maxPlainKey bytes), under
// raw/<the SHA-256 of its path in hex>. The manifest names the path.
func manifestPath(rev *Revision) string { return rev.Path + "manifest.json" }
func objectPath(rev *Revision, p string) string {
	if !plainKey(rev.Path, p) {
		sum := sha256.Sum256([]byte(p))
		return rev.Path + "raw/" + hex.EncodeToString(sum[:])
	}
	return rev.Path + "files/" + p
}

// maxPlainKey bounds the object keys (below the store's prefix) that name
// a file by its path; S3 allows 1,024 bytes with the prefix.
const maxPlainKey = 768

func plainKey(revPath, p string) bool {
	if len(revPath)+len("files/")+len(p) > maxPlainKey || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p {
		// S3-compatible services take a backslash for a separator (and
		// refuse a\..\x) or refuse it outright.
		if r < 0x20 || r == 0x7f || r == '\\' {
			return false
		}
	}
	return true
}

// encodeManifest renders es as manifest JSON.
func encodeManifest(es []entry) ([]byte, error) {
	m := manifest{Version: 1, Entries: make([]manifestEntry, len(es))}
	for i := range es {
		e := &es[i]
		size, mode := e.Size, int64(e.Mode.Perm())
		m.Entries[i] = manifestEntry{Path: &e.Path, Type: &e.Type, Size: &size, Mode: &mode, SHA256: e.SHA256}
		if !utf8.ValidString(e.Path) {
			m.Entries[i].Path, m.Entries[i].PathBytes = nil, base64.StdEncoding.EncodeToString([]byte(e.Path))
		}
		if !e.ModTime.IsZero() {
			m.Entries[i].MTime = e.ModTime.UnixMilli()
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestBytes {
		return nil, limitf("folder manifest would exceed %d bytes (too many entries)", MaxManifestBytes)
	}
	return data, nil
}

// parseManifest decodes and validates a manifest against lim: known fields
// only, version 1, safe unique paths, known types, modes within 0777,
// non-negative sizes (0 for directories), well-formed hashes, no entry below
// a file, and the entry and byte limits.
func parseManifest(data []byte, lim limits) ([]entry, error) {
	var m manifest
	if err := decodeStrict(data, &m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("manifest version %d is not 1", m.Version)
	}
	if len(m.Entries) > lim.maxEntries {
		return nil, limitf("folder manifest exceeds %d entries", lim.maxEntries)
	}
	es := make([]entry, 0, len(m.Entries))
	kinds := make(map[string]string, len(m.Entries))
	var total int64
	for i, me := range m.Entries {
		if me.PathBytes != "" {
			if me.Path != nil {
				return nil, fmt.Errorf("manifest entry %d has both a path and pathBytes", i)
			}
			raw, err := base64.StdEncoding.DecodeString(me.PathBytes)
			if err != nil || utf8.Valid(raw) {
				return nil, fmt.Errorf("manifest entry %d: pathBytes is not the base64 of a path that is not valid UTF-8", i)
			}
			p := string(raw)
			me.Path = &p
		}
		if me.Path == nil || me.Type == nil || me.Size == nil || me.Mode == nil {
			return nil, fmt.Errorf("manifest entry %d lacks a path, type, size or mode", i)
		}
		e := entry{Path: *me.Path, Type: *me.Type, Size: *me.Size, SHA256: me.SHA256}
		if err := validateEntryPath(e.Path); err != nil {
			return nil, fmt.Errorf("manifest entry %d: %w", i, err)
		}
		if e.Type != typeFile && e.Type != typeDir {
			return nil, fmt.Errorf("manifest entry %q has unknown type %q", e.Path, e.Type)
		}
		if *me.Mode < 0 || *me.Mode > 0o777 {
			return nil, fmt.Errorf("manifest entry %q has invalid mode %d", e.Path, *me.Mode)
		}
		e.Mode = os.FileMode(*me.Mode)
		if e.Size < 0 || (e.Type == typeDir && e.Size != 0) {
			return nil, fmt.Errorf("manifest entry %q has invalid size %d", e.Path, e.Size)
		}
		if e.SHA256 != "" {
			if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != e.SHA256 {
				return nil, fmt.Errorf("manifest entry %q has an invalid sha256", e.Path)
			}
		}
		if me.MTime != 0 {
			e.ModTime = time.UnixMilli(me.MTime)
		}
		if _, dup := kinds[e.Path]; dup {
			return nil, fmt.Errorf("manifest lists %q twice", e.Path)
		}
		kinds[e.Path] = e.Type
		total += e.Size
		if total > lim.maxBytes || total < 0 {
			return nil, limitf("folder manifest exceeds %d bytes", lim.maxBytes)
		}
		es = append(es, e)
	}
	for _, e := range es {
		for p := path.Dir(e.Path); p != "."; p = path.Dir(p) {
			if kinds[p] == typeFile {
				return nil, fmt.Errorf("manifest entry %q is below the file %q", e.Path, p)
			}
		}
	}
	sortEntries(es)
	return es, nil
}

// readManifest reads and parses a folder revision's manifest.
func readManifest(ctx context.Context, sl StorageLease, rev *Revision, lim limits, workspaceID string) ([]entry, error) {
	mp := manifestPath(rev)
	data, _, err := readAll(ctx, sl, mp, MaxManifestBytes)
	switch {
	case errors.Is(err, ErrNotExist):
		return nil, corrupt(workspaceID, mp, "folder revision %s is missing its manifest", rev.ID)
	case errors.Is(err, errTooLarge):
		return nil, corrupt(workspaceID, mp, "manifest exceeds %d bytes", MaxManifestBytes)
	case err != nil:
		return nil, err
	}
	sum := sha256.Sum256(data)
	if err := checkPin(rev, hex.EncodeToString(sum[:]), int64(len(data))); err != nil {
		return nil, &CorruptError{WorkspaceID: workspaceID, Path: mp, Err: err}
	}
	es, err := parseManifest(data, lim)
	if err != nil {
		if errors.Is(err, ErrLimitExceeded) {
			return nil, err
		}
		return nil, &CorruptError{WorkspaceID: workspaceID, Path: mp, Err: err}
	}
	return es, nil
}

// downloadFolder restores a folder revision into dir (files 0600,
// directories 0700), checking each file's size and, when recorded, hash.
func downloadFolder(ctx context.Context, sl StorageLease, rev *Revision, dir string, lim limits, workspaceID string) ([]entry, error) {
	es, err := readManifest(ctx, sl, rev, lim, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		target := filepath.Join(dir, filepath.FromSlash(e.Path))
		if e.Type == typeDir {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return nil, err
			}
		} else if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(folderParallelism)
	for _, e := range es {
		if e.Type != typeFile {
			continue
		}
		g.Go(func() error {
			return downloadFile(gctx, sl, rev, e, filepath.Join(dir, filepath.FromSlash(e.Path)), workspaceID)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return es, nil
}

// downloadFile fetches one folder object into target.
func downloadFile(ctx context.Context, sl StorageLease, rev *Revision, e entry, target, workspaceID string) error {
	op := objectPath(rev, e.Path)
	body, _, err := sl.Read(ctx, op)
	if errors.Is(err, ErrNotExist) {
		return corrupt(workspaceID, op, "folder revision %s is missing %q", rev.ID, e.Path)
	}
	if err != nil {
		return err
	}
	defer body.Close()
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	br := &boundedReader{ctx: ctx, r: body, max: e.Size, what: "folder object " + e.Path}
	n, err := io.Copy(io.MultiWriter(onlyWriter{f}, h), br)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var se *storageReadError
		if errors.As(err, &se) && errors.Is(se.err, ErrLimitExceeded) {
			return corrupt(workspaceID, op, "object is larger than the %d bytes the manifest records", e.Size)
		}
		if errors.As(err, &se) {
			return se.err
		}
		return err
	}
	if n != e.Size {
		return corrupt(workspaceID, op, "object has %d bytes, the manifest records %d", n, e.Size)
	}
	if e.SHA256 != "" && hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		return corrupt(workspaceID, op, "object content does not match the manifest's sha256")
	}
	return nil
}

// uploadFolder writes a folder revision from the snapshot in dir: every
// file object (copied from reuse, a map from sha256 to an existing object
// path, when the lease is a Copier), then the manifest last. Each written
// path is recorded in up.
//
// A copy is trusted only once read back: reuse names objects by the hash
// their manifest pins, and an object swapped or truncated since (behind
// aml's back, while a run held the lease) must not pass its damage on to
// the new revision. Each copy is streamed through SHA-256 (one read of
// each reused file, in place of the upload it saves; a local read of a
// hard link on a filesystem store) and, when it does not match, deleted
// and replaced by the snapshot's file, and its source is not copied again.
func uploadFolder(ctx context.Context, sl StorageLease, rev *Revision, dir string, es []entry, reuse map[string]string, up *uploaded, hook func(Step) error) (err error) {
	data, err := encodeManifest(es)
	if err != nil {
		return err
	}
	copier, _ := sl.(Copier)
	var damaged sync.Map // sources whose copy did not match
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(folderParallelism)
	for _, e := range es {
		if e.Type != typeFile {
			continue
		}
		g.Go(func() error {
			dst := objectPath(rev, e.Path)
			if src, ok := reuse[e.SHA256]; ok && copier != nil && e.SHA256 != "" {
				if _, bad := damaged.Load(src); !bad {
					err := copier.Copy(gctx, src, dst)
					if errors.Is(err, ErrPreconditionFailed) {
						return fmt.Errorf("copy %s: %w", dst, err)
					}
					if err == nil {
						up.add(dst)
						match, err := holds(gctx, sl, dst, e)
						if err != nil {
							return fmt.Errorf("verify the copy %s: %w", dst, err)
						}
						if match {
							return hook(StepArtifactObject)
						}
						// The source no longer holds what its manifest
						// pins: upload the content in place of the copy.
						damaged.Store(src, true)
						if err := sl.Delete(gctx, []string{dst}); err != nil {
							return fmt.Errorf("replace %s, a copy of the damaged %s: %w", dst, src, err)
						}
					}
					// Otherwise (the source was pruned meanwhile, copying
					// is unsupported): upload the content.
				}
			}
			f, err := os.Open(filepath.Join(dir, filepath.FromSlash(e.Path)))
			if err != nil {
				return err
			}
			defer f.Close()
			// The snapshot may be a hard link: check that what is sent is
			// what the manifest records.
			body := &verifyingReader{r: io.LimitReader(f, e.Size+1), h: sha256.New()}
			_, err = sl.Write(gctx, dst, body, WriteOptions{Condition: Absent, ContentLength: e.Size})
			if err == nil && !body.eof {
				_, err = io.Copy(io.Discard, body)
			}
			changed := body.n > e.Size || (body.eof && (body.n != e.Size || hex.EncodeToString(body.h.Sum(nil)) != e.SHA256))
			if err == nil || !errors.Is(err, ErrPreconditionFailed) {
				up.add(dst) // also after an error: the write may have happened
			}
			if changed {
				return fmt.Errorf("upload %s: %q changed during the save (save again)", dst, e.Path)
			}
			if err != nil {
				return fmt.Errorf("upload %s: %w", dst, err)
			}
			return hook(StepArtifactObject)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	mp := manifestPath(rev)
	if _, err := sl.Write(ctx, mp, bytes.NewReader(data), WriteOptions{Condition: Absent, ContentLength: int64(len(data)), ContentType: "application/json"}); err != nil {
		return fmt.Errorf("upload %s: %w", mp, err)
	}
	sum := sha256.Sum256(data)
	rev.SHA256, rev.Size = hex.EncodeToString(sum[:]), int64(len(data))
	up.add(mp)
	return hook(StepArtifactObject)
}

// holds reports whether object p has exactly the size and SHA-256 that e
// records, streaming it through the hash (bounded by e.Size).
func holds(ctx context.Context, sl StorageLease, p string, e entry) (bool, error) {
	body, _, err := sl.Read(ctx, p)
	if err != nil {
		return false, err
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(h, &boundedReader{ctx: ctx, r: body, max: e.Size, what: "folder object " + e.Path})
	var se *storageReadError
	switch {
	case errors.As(err, &se) && errors.Is(se.err, ErrLimitExceeded):
		return false, nil // longer than recorded
	case errors.As(err, &se):
		return false, se.err
	case err != nil:
		return false, err
	}
	return n == e.Size && hex.EncodeToString(h.Sum(nil)) == e.SHA256, nil
}

// verifyingReader counts and hashes what it reads and notes the end.
type verifyingReader struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	eof bool
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if err == io.EOF {
		v.eof = true
	}
	return n, err
}

// reuseMap maps the hashes of a folder revision's files to their objects.
func reuseMap(rev *Revision, es []entry) map[string]string {
	m := make(map[string]string)
	for _, e := range es {
		if e.Type == typeFile && e.SHA256 != "" {
			if _, ok := m[e.SHA256]; !ok {
				m[e.SHA256] = objectPath(rev, e.Path)
			}
		}
	}
	return m
}

// uploaded records the objects written for a new revision.
type uploaded struct {
	mu    sync.Mutex
	paths []string
}

func (u *uploaded) add(p string) {
	u.mu.Lock()
	u.paths = append(u.paths, p)
	u.mu.Unlock()
}

func (u *uploaded) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.paths...)
}

// errTooLarge reports a control object above its bound.
var errTooLarge = errors.New("object too large")

// readAll reads a whole object of at most max bytes.
func readAll(ctx context.Context, sl StorageLease, p string, max int64) ([]byte, Version, error) {
	body, v, err := sl.Read(ctx, p)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > max {
		return nil, "", errTooLarge
	}
	return data, v, nil
}
