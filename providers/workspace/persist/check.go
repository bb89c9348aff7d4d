package persist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Problem kinds of a check.
const (
	// ProblemIndexMissing: no index, while published revisions exist.
	ProblemIndexMissing = "index-missing"
	// ProblemIndexDamaged: the index does not parse or validate.
	ProblemIndexDamaged = "index-damaged"
	// ProblemRevisionMissing: a revision the index lists is not stored
	// (an archive, or a folder revision's manifest).
	ProblemRevisionMissing = "revision-missing"
	// ProblemRevisionMismatch: a revision's archive or manifest does not
	// match the size or digest the index pins.
	ProblemRevisionMismatch = "revision-mismatch"
	// ProblemManifestDamaged: a folder revision's manifest does not
	// parse.
	ProblemManifestDamaged = "manifest-damaged"
	// ProblemFileMissing: a file a folder manifest lists is not stored.
	ProblemFileMissing = "file-missing"
	// ProblemFileMismatch: a folder file's size or digest is not the
	// manifest's.
	ProblemFileMismatch = "file-mismatch"
)

// Problem is one damage a check found.
type Problem struct {
	// Kind is one of the Problem constants.
	Kind string `json:"kind"`
	// Object is where it is (an s3:// URL, a path).
	Object string `json:"object"`
	// Revision is the revision concerned, if any.
	Revision string `json:"revision,omitempty"`
	// Detail says what is wrong.
	Detail string `json:"detail"`
}

// WorkspaceCheck is what Check found in one workspace.
type WorkspaceCheck struct {
	// ID is the workspace id.
	ID string `json:"id"`
	// Index is "ok", "missing" (with published revisions: a problem),
	// "damaged", or "none" (a workspace with nothing published).
	Index string `json:"index"`
	// Current is the index's current revision.
	Current string `json:"current,omitempty"`
	// Revisions counts the revisions the index lists.
	Revisions int `json:"revisions"`
	// Objects and Bytes count what was read (with ReadData) or listed.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Problems are the damages found; none means the workspace is sound.
	Problems []Problem `json:"problems"`
	// Notes are findings that are not damage: revisions the index does
	// not pin (written by an earlier aml), unpublished revisions.
	Notes []string `json:"notes"`
}

// OK reports whether no problem was found.
func (c *WorkspaceCheck) OK() bool { return len(c.Problems) == 0 }

// CheckOptions configure Check.
type CheckOptions struct {
	// ReadData reads every object of every revision back and compares it
	// with its digest: an archive with the index's pin, each folder file
	// with its manifest entry. Without it, sizes are compared (from the
	// store's listing) and manifests, which are small, are read.
	ReadData bool
}

// Check verifies workspaces of storage, as restic's check verifies a
// repository: the index parses and validates, every revision it names
// exists, every revision's archive or manifest has the size and digest
// the index pins, and every file a folder manifest lists exists with its
// size (and, with ReadData, its digest). ids are the workspaces to check;
// none means every workspace of a storage that implements Lister. It
// writes nothing and takes no lock. An error means the check could not
// run (the store cannot be listed); damage is reported in the result.
func Check(ctx context.Context, storage Storage, ids []string, opts CheckOptions) ([]WorkspaceCheck, error) {
	if len(ids) == 0 {
		l, ok := storage.(Lister)
		if !ok {
			return nil, fmt.Errorf("%s storage cannot list its workspaces: name the workspace ids to check", storage.Name())
		}
		var err error
		if ids, err = l.Workspaces(ctx); err != nil {
			return nil, err
		}
	}
	var out []WorkspaceCheck
	for _, id := range ids {
		c, err := checkWorkspace(ctx, storage, id, opts)
		if err != nil {
			return out, fmt.Errorf("checking workspace %q: %w", id, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// checkWorkspace checks one workspace.
func checkWorkspace(ctx context.Context, storage Storage, id string, opts CheckOptions) (WorkspaceCheck, error) {
	c := WorkspaceCheck{ID: id, Problems: []Problem{}, Notes: []string{}}
	sl, err := storage.Acquire(ctx, StorageAcquireRequest{ID: id, EvaluationID: "check"})
	if err != nil {
		return c, err
	}
	defer sl.Release(context.WithoutCancel(ctx))
	loc := func(p string) string { return location(storage, id, p) }
	problem := func(kind, object, rev, format string, args ...any) {
		c.Problems = append(c.Problems, Problem{Kind: kind, Object: loc(object), Revision: rev, Detail: fmt.Sprintf(format, args...)})
	}
	objects, err := listInfo(ctx, sl, "")
	if err != nil {
		return c, err
	}
	sizes := make(map[string]int64, len(objects))
	for _, o := range objects {
		sizes[o.Path] = o.Size
	}
	index, _, err := readIndex(ctx, sl, id)
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		c.Index = "damaged"
		problem(ProblemIndexDamaged, IndexPath, "", "%v", ce.Err)
	case err != nil:
		return c, err
	case index == nil:
		published, err := unannounced(ctx, sl)
		if err != nil {
			return c, err
		}
		if len(published) > 0 {
			c.Index = "missing"
			problem(ProblemIndexMissing, IndexPath, "", "the index is missing, but %d published revision(s) are stored (%s): `aml workspace recover` rebuilds it", len(published), strings.Join(published, ", "))
		} else {
			c.Index = "none"
		}
	default:
		c.Index, c.Current, c.Revisions = "ok", index.Current, len(index.Revisions)
	}
	referenced := map[string]bool{}
	if index != nil {
		for i := range index.Revisions {
			rev := &index.Revisions[i]
			referenced[rev.ID] = true
			if !rev.Pinned() {
				c.Notes = append(c.Notes, fmt.Sprintf("revision %s is not pinned (an earlier aml wrote it): its content cannot be compared with the index", rev.ID))
			}
			if err := checkRevision(ctx, sl, rev, sizes, opts, &c, problem); err != nil {
				return c, err
			}
		}
	}
	// What is stored and not listed is not damage: a save in progress,
	// or one a sweep removes.
	var unlisted []string
	seen := map[string]bool{}
	for _, o := range objects {
		if strings.HasPrefix(o.Path, "revisions/") {
			if r := revisionOf(o.Path); !referenced[r] && !seen[r] {
				seen[r] = true
				unlisted = append(unlisted, r)
			}
		}
	}
	if len(unlisted) > 0 && c.Index == "ok" {
		c.Notes = append(c.Notes, fmt.Sprintf("%d stored revision(s) the index does not list (unpublished saves, removed by the next acquisition's sweep once their writers are gone): %s", len(unlisted), strings.Join(unlisted, ", ")))
	}
	return c, nil
}

// checkRevision checks one revision the index lists.
func checkRevision(ctx context.Context, sl StorageLease, rev *Revision, sizes map[string]int64, opts CheckOptions, c *WorkspaceCheck, problem func(kind, object, rev, format string, args ...any)) error {
	pinned := rev.PinnedPath()
	size, ok := sizes[pinned]
	if !ok {
		problem(ProblemRevisionMissing, pinned, rev.ID, "revision %s is listed by the index but its %s is not stored", rev.ID, kindOfPinned(rev))
		return nil
	}
	if rev.Pinned() && size != rev.Size {
		problem(ProblemRevisionMismatch, pinned, rev.ID, "its %s is %d bytes, the index pins %d", kindOfPinned(rev), size, rev.Size)
		if rev.Format == FormatArchive {
			return nil
		}
	}
	if rev.Format == FormatArchive {
		c.Objects++
		if !opts.ReadData {
			c.Bytes += size
			return nil
		}
		sum, n, err := hashObject(ctx, sl, pinned)
		if err != nil {
			return err
		}
		c.Bytes += n
		if rev.Pinned() && (sum != rev.SHA256 || n != rev.Size) {
			problem(ProblemRevisionMismatch, pinned, rev.ID, "its archive has SHA-256 %s, the index pins %s", shortSum(sum), shortSum(rev.SHA256))
		}
		return nil
	}
	data, _, err := readAll(ctx, sl, pinned, MaxManifestBytes)
	if err != nil {
		if errors.Is(err, ErrNotExist) {
			problem(ProblemRevisionMissing, pinned, rev.ID, "its manifest was removed during the check")
			return nil
		}
		if errors.Is(err, errTooLarge) {
			problem(ProblemManifestDamaged, pinned, rev.ID, "the manifest exceeds %d bytes", MaxManifestBytes)
			return nil
		}
		return err
	}
	c.Objects++
	c.Bytes += int64(len(data))
	sum := sha256.Sum256(data)
	if err := checkPin(rev, hex.EncodeToString(sum[:]), int64(len(data))); err != nil {
		problem(ProblemRevisionMismatch, pinned, rev.ID, "%v", err)
		return nil
	}
	es, err := parseManifest(data, limits{maxEntries: 1 << 30, maxBytes: 1 << 62})
	if err != nil {
		problem(ProblemManifestDamaged, pinned, rev.ID, "%v", err)
		return nil
	}
	for _, e := range es {
		if e.Type != typeFile {
			continue
		}
		op := objectPath(rev, e.Path)
		got, ok := sizes[op]
		switch {
		case !ok:
			problem(ProblemFileMissing, op, rev.ID, "%q of revision %s is not stored", e.Path, rev.ID)
			continue
		case got != e.Size:
			problem(ProblemFileMismatch, op, rev.ID, "%q of revision %s is %d bytes, its manifest says %d", e.Path, rev.ID, got, e.Size)
			continue
		}
		c.Objects++
		if !opts.ReadData {
			c.Bytes += got
			continue
		}
		fsum, n, err := hashObject(ctx, sl, op)
		if errors.Is(err, ErrNotExist) {
			problem(ProblemFileMissing, op, rev.ID, "%q of revision %s was removed during the check", e.Path, rev.ID)
			continue
		}
		if err != nil {
			return err
		}
		c.Bytes += n
		if e.SHA256 != "" && fsum != e.SHA256 {
			problem(ProblemFileMismatch, op, rev.ID, "%q of revision %s has SHA-256 %s, its manifest says %s", e.Path, rev.ID, shortSum(fsum), shortSum(e.SHA256))
		}
	}
	return nil
}

func kindOfPinned(rev *Revision) string {
	if rev.Format == FormatFolder {
		return "manifest"
	}
	return "archive"
}

// hashObject reads an object and returns its SHA-256 and size.
func hashObject(ctx context.Context, sl StorageLease, p string) (string, int64, error) {
	body, _, err := sl.Read(ctx, p)
	if err != nil {
		return "", 0, err
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(h, &boundedReader{ctx: ctx, r: body, max: 1 << 62, what: p})
	if err != nil {
		var se *storageReadError
		if errors.As(err, &se) {
			err = se.err
		}
		return "", 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// listInfo lists with sizes: through InfoLister, or by reading each
// object's size.
func listInfo(ctx context.Context, sl StorageLease, prefix string) ([]ObjectInfo, error) {
	if il, ok := sl.(InfoLister); ok {
		return il.ListInfo(ctx, prefix)
	}
	paths, err := sl.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]ObjectInfo, 0, len(paths))
	for _, p := range paths {
		body, _, err := sl.Read(ctx, p)
		if errors.Is(err, ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		n, err := io.Copy(io.Discard, body)
		body.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ObjectInfo{Path: p, Size: n})
	}
	return out, nil
}

// Recovery is what Recover found: the index it would write (or wrote) and
// the stored revisions it left out, with why.
type Recovery struct {
	// Index is the rebuilt index: every sound published revision, newest
	// first (by the store's modification times), the newest current.
	Index *Index `json:"index"`
	// Skipped are the revisions left out, with the reason.
	Skipped []SkippedRevision `json:"skipped"`
	// Written is set once the index was published.
	Written bool `json:"written"`
}

// SkippedRevision is a stored revision Recover leaves out.
type SkippedRevision struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Recover rebuilds the missing or damaged index of workspace id from the
// revisions stored: it takes the writer lock, reads every published
// revision (a revision no pending marker announces) in full and keeps
// the sound ones (an archive that extracts, a folder whose manifest
// parses and whose files are all stored with their sizes), pinned with
// their digests and sizes and dated by the store's modification times,
// newest first and current. confirm is called with the plan while the
// lock is held; the index is written (create-if-absent, or replacing the
// damaged one conditionally) only when it returns true. A workspace
// whose index is sound is refused, as is one with no sound revision.
// temp is where archives are extracted to be checked ("" for the
// temporary directory).
func Recover(ctx context.Context, storage Storage, id, temp string, confirm func(*Recovery) bool) (*Recovery, error) {
	sl, err := storage.Acquire(ctx, StorageAcquireRequest{ID: id, EvaluationID: "recover", Lock: true})
	if err != nil {
		return nil, err
	}
	defer sl.Release(context.WithoutCancel(ctx))
	loc := location(storage, id, IndexPath)
	index, version, err := readIndex(ctx, sl, id)
	var ce *CorruptError
	damaged := errors.As(err, &ce)
	switch {
	case err != nil && !damaged:
		return nil, err
	case index != nil:
		return nil, fmt.Errorf("workspace %q: its index %s is sound (current revision %s, %d retained): there is nothing to recover", id, loc, index.Current, len(index.Revisions))
	case damaged:
		// Replaced only as it is now.
		_, version, err = readAll(ctx, sl, IndexPath, 1<<62)
		if err != nil {
			return nil, fmt.Errorf("workspace %q: reading the damaged index %s: %w", id, loc, err)
		}
	}
	objects, err := listInfo(ctx, sl, "revisions/")
	if err != nil {
		return nil, err
	}
	markers, err := sl.List(ctx, "pending/")
	if err != nil {
		return nil, err
	}
	announced := map[string]bool{}
	for _, m := range markers {
		announced[strings.TrimSuffix(strings.TrimPrefix(m, "pending/"), ".json")] = true
	}
	type candidate struct {
		rev     Revision
		modTime time.Time
	}
	byID := map[string]*candidate{}
	var order []string
	sizes := map[string]int64{}
	for _, o := range objects {
		sizes[o.Path] = o.Size
		revID := revisionOf(o.Path)
		if validateRevisionID(revID) != nil {
			continue
		}
		var format string
		switch {
		case o.Path == RevisionPath(revID, FormatArchive):
			format = FormatArchive
		case o.Path == RevisionPath(revID, FormatFolder)+"manifest.json":
			format = FormatFolder
		default:
			continue
		}
		if byID[revID] == nil {
			order = append(order, revID)
		}
		byID[revID] = &candidate{rev: Revision{ID: revID, Format: format, Path: RevisionPath(revID, format)}, modTime: o.ModTime}
	}
	rec := &Recovery{Skipped: []SkippedRevision{}}
	seen := map[string]bool{}
	for _, o := range objects {
		if r := revisionOf(o.Path); r != "" && byID[r] == nil && !seen[r] {
			seen[r] = true
			rec.Skipped = append(rec.Skipped, SkippedRevision{ID: r, Reason: "incomplete: a folder revision without its manifest (a save that did not finish)"})
		}
	}
	var sound []*candidate
	for _, revID := range order {
		c := byID[revID]
		if announced[revID] {
			rec.Skipped = append(rec.Skipped, SkippedRevision{ID: revID, Reason: "never published: a pending marker announces it (a save in progress, or one that was killed)"})
			continue
		}
		sum, size, err := verifyRevision(ctx, sl, &c.rev, sizes, temp, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			rec.Skipped = append(rec.Skipped, SkippedRevision{ID: revID, Reason: "damaged: " + err.Error()})
			continue
		}
		c.rev.SHA256, c.rev.Size = sum, size
		sound = append(sound, c)
	}
	if len(sound) == 0 {
		return rec, fmt.Errorf("workspace %q: no sound published revision is stored, so there is nothing to rebuild the index %s from", id, loc)
	}
	sort.SliceStable(sound, func(i, j int) bool {
		if !sound[i].modTime.Equal(sound[j].modTime) {
			return sound[i].modTime.After(sound[j].modTime)
		}
		return sound[i].rev.ID < sound[j].rev.ID
	})
	next := &Index{Version: IndexVersion, Current: sound[0].rev.ID}
	for _, c := range sound {
		t := c.modTime
		if t.IsZero() {
			t = time.Now()
		}
		c.rev.CreatedAt = formatCreatedAt(t)
		next.Revisions = append(next.Revisions, c.rev)
	}
	if err := next.Validate(); err != nil {
		return rec, fmt.Errorf("workspace %q: the rebuilt index is invalid: %w", id, err)
	}
	data, err := json.Marshal(next)
	if err != nil {
		return rec, err
	}
	if len(data) > MaxIndexBytes {
		return rec, fmt.Errorf("workspace %q: the rebuilt index of %d revisions would exceed %d bytes", id, len(next.Revisions), MaxIndexBytes)
	}
	rec.Index = next
	if confirm != nil && !confirm(rec) {
		return rec, nil
	}
	cond := Absent
	if damaged {
		cond = MatchVersion(version)
	}
	if _, err := sl.Write(ctx, IndexPath, strings.NewReader(string(data)), WriteOptions{Condition: cond, ContentLength: int64(len(data)), ContentType: "application/json"}); err != nil {
		if errors.Is(err, ErrPreconditionFailed) {
			return rec, fmt.Errorf("workspace %q: another writer wrote %s meanwhile; check the store again: %w", id, loc, err)
		}
		return rec, fmt.Errorf("workspace %q: writing %s: %w", id, loc, err)
	}
	rec.Written = true
	return rec, nil
}

// verifyRevision reads a stored revision in full and returns the digest
// and size of what the index pins (its archive, its manifest), or why it
// is not sound.
func verifyRevision(ctx context.Context, sl StorageLease, rev *Revision, sizes map[string]int64, temp, id string) (string, int64, error) {
	if rev.Format == FormatFolder {
		data, _, err := readAll(ctx, sl, rev.PinnedPath(), MaxManifestBytes)
		if err != nil {
			return "", 0, err
		}
		es, err := parseManifest(data, limits{maxEntries: 1 << 30, maxBytes: 1 << 62})
		if err != nil {
			return "", 0, fmt.Errorf("its manifest does not parse: %w", err)
		}
		for _, e := range es {
			if e.Type != typeFile {
				continue
			}
			got, ok := sizes[objectPath(rev, e.Path)]
			if !ok {
				return "", 0, fmt.Errorf("%q is not stored", e.Path)
			}
			if got != e.Size {
				return "", 0, fmt.Errorf("%q is %d bytes, its manifest says %d", e.Path, got, e.Size)
			}
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]), int64(len(data)), nil
	}
	dir, err := os.MkdirTemp(temp, "aml-recover-")
	if err != nil {
		return "", 0, err
	}
	defer removeAll(dir)
	body, _, err := sl.Read(ctx, rev.Path)
	if err != nil {
		return "", 0, err
	}
	defer body.Close()
	h := &countingHash{h: sha256.New()}
	if _, err := extractArchive(ctx, io.TeeReader(body, h), dir, limits{maxEntries: 1 << 30, maxBytes: 1 << 62, rootEntry: 1}, 1<<62, id, rev.Path); err != nil {
		return "", 0, fmt.Errorf("its archive does not extract: %w", err)
	}
	if _, err := io.Copy(h, body); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.h.Sum(nil)), h.n, nil
}
