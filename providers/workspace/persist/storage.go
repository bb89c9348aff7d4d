package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aml-go/aml/eval"
)

// ErrNotExist is wrapped by StorageLease errors about a missing object.
var ErrNotExist = errors.New("storage object does not exist")

// ErrPreconditionFailed is wrapped by StorageLease.Write (and Copy) errors
// when the write condition does not hold: the object exists for Absent, or
// is missing or has another version for MatchVersion. A stale publication
// of workspace.json is reported with it; it is never a
// *eval.WorkspaceConflictError.
var ErrPreconditionFailed = errors.New("storage write precondition failed")

// Storage is the backend seam of a revision-backed workspace provider
// (the Go form of WorkspaceStorageAdapter): it scopes one durable namespace
// per workspace id and owns writer authority. Implementations are safe for
// concurrent use.
type Storage interface {
	// Name is the adapter's normalized name; lease ids are
	// "<Name>-<uuid>".
	Name() string
	// Acquire opens the namespace of req.ID. With req.Lock it first takes
	// exclusive writer authority and fails with *eval.WorkspaceConflictError
	// while another healthy writer holds it; without it, it takes none.
	// It returns promptly with an error wrapping context.Cause(ctx) once
	// ctx is done.
	Acquire(ctx context.Context, req StorageAcquireRequest) (StorageLease, error)
}

// StorageAcquireRequest is what the persistence layer asks a Storage for.
type StorageAcquireRequest struct {
	// ID is the durable workspace identity: non-empty and trimmed.
	ID string
	// EvaluationID is the run identity (informational).
	EvaluationID string
	// Lock asks for exclusive writer authority.
	Lock bool
}

// StorageLease is access to one workspace namespace. Paths are relative,
// slash-separated and valid for ValidateStoragePath. Methods are safe for
// concurrent use; the persistence layer uploads several objects at once.
type StorageLease interface {
	// Read opens an object and reports its current version. A missing
	// object gives an error wrapping ErrNotExist. The caller closes the
	// body.
	Read(ctx context.Context, path string) (io.ReadCloser, Version, error)
	// Write stores a complete object atomically (readers see the old or
	// the new content, never a part) if opts.Condition holds at the
	// moment of replacement, and returns the new version. A condition
	// that does not hold gives an error wrapping ErrPreconditionFailed.
	// The body must be exactly opts.ContentLength bytes when that is not
	// negative.
	Write(ctx context.Context, path string, body io.Reader, opts WriteOptions) (Version, error)
	// List returns every object path that starts with prefix, sorted. The
	// list is complete (an adapter follows its pagination).
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete removes objects; missing ones are not an error.
	Delete(ctx context.Context, paths []string) error
	// Release relinquishes writer authority (reporting a lock found lost)
	// and any other resource. It is idempotent.
	Release(ctx context.Context) error
}

// Locator is an optional Storage capability that says where things are,
// for messages that must name them: errors about a missing or damaged
// index, and what aml workspace check reports.
type Locator interface {
	// Location returns where object path of workspace id is kept: an
	// s3:// URL, a file path.
	Location(id, path string) string
	// Store returns the store as the aml workspace commands take it: a
	// directory, or s3://BUCKET/PREFIX.
	Store() string
}

// location names object path of workspace id in s: its Location when s
// is a Locator.
func location(s Storage, id, path string) string {
	if l, ok := s.(Locator); ok {
		return l.Location(id, path)
	}
	return fmt.Sprintf("%s of %s workspace %q", path, s.Name(), id)
}

// storeName is s as the aml workspace commands take it, or its name.
func storeName(s Storage) string {
	if l, ok := s.(Locator); ok {
		return l.Store()
	}
	return s.Name()
}

// Unlocker is an optional Storage capability: Unlock removes the writer
// lock of workspace id when its holder is gone (a process of this
// machine that no longer exists) or stale, or whatever holds it with
// force (aml workspace unlock). It returns who held it; a workspace with
// no lock is an error wrapping fs.ErrNotExist, a live holder without
// force one wrapping ErrLockHeld.
type Unlocker interface {
	Unlock(ctx context.Context, id string, force bool) (holder string, err error)
}

// ErrLockHeld is wrapped by Unlocker errors for a lock whose holder is
// alive and refreshes it.
var ErrLockHeld = errors.New("the writer lock is held by a live run")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	// Path is the object's path in the workspace's namespace.
	Path string
	// Size is its length in bytes.
	Size int64
	// ModTime is when it was last written, by the store's clock.
	ModTime time.Time
}

// InfoLister is an optional StorageLease capability: List with each
// object's size and modification time, as the store keeps them (an S3
// listing carries both). aml workspace check uses it to find truncated
// objects without reading them, and aml workspace recover to order the
// revisions it finds.
type InfoLister interface {
	// ListInfo is List with each object's ObjectInfo, sorted by path.
	ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// Copier is an optional StorageLease capability: copy an existing object
// to a new path inside the namespace without sending its content through
// the caller (a hard link, a server-side copy). The folder format uses it
// to reuse unchanged files. dst is created only if absent (otherwise the
// error wraps ErrPreconditionFailed); a missing src gives an error wrapping
// ErrNotExist.
type Copier interface {
	// Copy creates dst with src's content.
	Copy(ctx context.Context, src, dst string) error
}

// LockChecker is an optional StorageLease capability: CheckLock reports an
// error when writer authority taken at Acquire has been lost (a lock
// compromise); it returns nil for a lease that took no lock. Save calls it
// before uploading and again right before publication.
type LockChecker interface {
	// CheckLock reports a lost lock.
	CheckLock(ctx context.Context) error
}

// Version identifies one content of an object (an ETag, a content hash).
// It is opaque to the persistence layer, which only compares it through
// MatchVersion conditions.
type Version string

// ConditionKind discriminates a Condition.
type ConditionKind int

// Kinds of write conditions.
const (
	// ConditionNone writes unconditionally.
	ConditionNone ConditionKind = iota
	// ConditionAbsent writes only if the object does not exist.
	ConditionAbsent
	// ConditionVersion writes only if the object exists with a version.
	ConditionVersion
)

// Condition is the precondition of a Write: an immutable value. The zero
// value is unconditional.
type Condition struct {
	kind    ConditionKind
	version Version
}

// Absent is the create-if-absent condition.
var Absent = Condition{kind: ConditionAbsent}

// MatchVersion is the condition that the object exists with version v.
func MatchVersion(v Version) Condition {
	return Condition{kind: ConditionVersion, version: v}
}

// Kind is the condition's kind.
func (c Condition) Kind() ConditionKind { return c.kind }

// Version is the version a ConditionVersion requires ("" otherwise).
func (c Condition) Version() Version { return c.version }

// String describes the condition.
func (c Condition) String() string {
	switch c.kind {
	case ConditionAbsent:
		return "absent"
	case ConditionVersion:
		return fmt.Sprintf("version %q", string(c.version))
	}
	return "none"
}

// WriteOptions qualify a Write.
type WriteOptions struct {
	// Condition is the write precondition.
	Condition Condition
	// ContentLength is the exact body length, or -1 when unknown.
	ContentLength int64
	// ContentType is a MIME type hint ("" for none).
	ContentType string
}

// ValidateStoragePath reports whether p is a valid object path: non-empty,
// relative, slash-separated, valid UTF-8, without NUL (or, on Windows,
// backslash), and without empty, "." or ".." segments.
func ValidateStoragePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") || runtime.GOOS == "windows" && strings.Contains(p, "\\") || !utf8.ValidString(p) {
		return fmt.Errorf("invalid storage path %q", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid storage path %q", p)
		}
	}
	return nil
}

// ValidateStoragePrefix reports whether p is a valid List prefix: "" or a
// valid object path, optionally ending in "/".
func ValidateStoragePrefix(p string) error {
	if p == "" {
		return nil
	}
	if err := ValidateStoragePath(strings.TrimSuffix(p, "/")); err != nil {
		return fmt.Errorf("invalid storage prefix %q", p)
	}
	return nil
}

// ValidateID reports whether id is a valid durable workspace identity:
// non-empty, valid UTF-8 and equal to its trimmed form.
func ValidateID(id string) error { return (&eval.WorkspaceAcquireRequest{ID: id}).Validate() }

// EncodeSegment maps a workspace id to one portable storage path segment:
// encodeURIComponent, with !'()* also percent-encoded and the names "." and
// ".." encoded as "%2E" and "%2E%2E". Letters, digits and -_.~ are kept;
// every other UTF-8 byte becomes %XX (upper-case hex).
func EncodeSegment(id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return "", err
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	s := b.String()
	if s == "." || s == ".." {
		s = strings.ReplaceAll(s, ".", "%2E")
	}
	return s, nil
}
