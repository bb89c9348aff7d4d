package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/eval"
)

// MemoryStorageName is the name of a MemoryStorage.
const MemoryStorageName = "memory"

// Operations named to a MemoryStorage fault function.
const (
	OpRead   = "read"
	OpWrite  = "write"
	OpCopy   = "copy"
	OpList   = "list"
	OpDelete = "delete"
)

// ErrLockLost is wrapped by the errors of a MemoryStorage lease whose lock
// was broken with BreakLock.
var ErrLockLost = errors.New("writer lock was lost")

// MemoryStorage is an in-memory Storage for tests: objects per workspace
// id, versions that are the sha256 of the content, atomic conditional
// writes, copies that share content, writer locks that make a second
// locked Acquire of a held id fail with *eval.WorkspaceConflictError, and
// fault injection. It is safe for concurrent use.
type MemoryStorage struct {
	mu      sync.Mutex
	spaces  map[string]map[string][]byte
	locks   map[string]*memoryLease
	fault   func(op, workspaceID, path string) error
	written int64
	// times are the objects' write times, by workspace id and path.
	times map[[2]string]time.Time
}

// NewMemoryStorage returns an empty MemoryStorage.
func NewMemoryStorage() *MemoryStorage {
	return &MemoryStorage{spaces: map[string]map[string][]byte{}, locks: map[string]*memoryLease{}, times: map[[2]string]time.Time{}}
}

// Name implements Storage: MemoryStorageName.
func (m *MemoryStorage) Name() string { return MemoryStorageName }

// SetFault installs f (nil removes it): it is called before every lease
// operation on a path (List with the prefix, Delete once per path, Copy
// with the destination) and a non-nil result fails that operation.
func (m *MemoryStorage) SetFault(f func(op, workspaceID, path string) error) {
	m.mu.Lock()
	m.fault = f
	m.mu.Unlock()
}

// Object returns a copy of one object.
func (m *MemoryStorage) Object(workspaceID, path string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.spaces[workspaceID][path]
	return bytes.Clone(data), ok
}

// PutObject stores an object unconditionally (to simulate corruption).
func (m *MemoryStorage) PutObject(workspaceID, path string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.space(workspaceID)[path] = bytes.Clone(data)
	m.times[[2]string{workspaceID, path}] = time.Now()
}

// DeleteObject removes an object (to simulate a missing artifact).
func (m *MemoryStorage) DeleteObject(workspaceID, path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.spaces[workspaceID], path)
}

// Paths lists the object paths of a workspace, sorted.
func (m *MemoryStorage) Paths(workspaceID string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []string
	for p := range m.spaces[workspaceID] {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Locked reports whether a lease holds the workspace's lock.
func (m *MemoryStorage) Locked(workspaceID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.locks[workspaceID] != nil
}

// BreakLock takes the workspace's lock away from its holder, as a stale
// takeover would: the holder's CheckLock, writes and Release then fail
// with ErrLockLost.
func (m *MemoryStorage) BreakLock(workspaceID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.locks[workspaceID]; l != nil {
		l.lost = true
		delete(m.locks, workspaceID)
	}
}

// BytesWritten is the total of body bytes accepted by Write (copies count
// nothing).
func (m *MemoryStorage) BytesWritten() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written
}

func (m *MemoryStorage) space(id string) map[string][]byte {
	s := m.spaces[id]
	if s == nil {
		s = map[string][]byte{}
		m.spaces[id] = s
	}
	return s
}

// Acquire implements Storage.
func (m *MemoryStorage) Acquire(ctx context.Context, req StorageAcquireRequest) (StorageLease, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err := ValidateID(req.ID); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := &memoryLease{m: m, id: req.ID, locked: req.Lock, token: uuid.NewString()}
	if req.Lock {
		if m.locks[req.ID] != nil {
			return nil, &eval.WorkspaceConflictError{WorkspaceID: req.ID}
		}
		m.locks[req.ID] = l
	}
	return l, nil
}

// memoryLease is a MemoryStorage lease; its state is guarded by m.mu.
type memoryLease struct {
	m        *MemoryStorage
	id       string
	token    string
	locked   bool
	lost     bool
	released bool
}

// check runs under m.mu before an operation.
func (l *memoryLease) check(ctx context.Context, op, path string, mutating bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if l.released {
		return fmt.Errorf("memory storage: %s %s after release", op, path)
	}
	if mutating && l.lost {
		return fmt.Errorf("memory storage: %s %s: %w", op, path, ErrLockLost)
	}
	if l.m.fault != nil {
		if err := l.m.fault(op, l.id, path); err != nil {
			return err
		}
	}
	return nil
}

func memoryVersion(data []byte) Version {
	sum := sha256.Sum256(data)
	return Version(hex.EncodeToString(sum[:]))
}

// Read implements StorageLease.
func (l *memoryLease) Read(ctx context.Context, path string) (io.ReadCloser, Version, error) {
	if err := ValidateStoragePath(path); err != nil {
		return nil, "", err
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(ctx, OpRead, path, false); err != nil {
		return nil, "", err
	}
	data, ok := l.m.spaces[l.id][path]
	if !ok {
		return nil, "", fmt.Errorf("memory storage: %s: %w", path, ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), memoryVersion(data), nil
}

// Write implements StorageLease.
func (l *memoryLease) Write(ctx context.Context, path string, body io.Reader, opts WriteOptions) (Version, error) {
	if err := ValidateStoragePath(path); err != nil {
		return "", err
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	if opts.ContentLength >= 0 && int64(len(data)) != opts.ContentLength {
		return "", fmt.Errorf("memory storage: %s: body has %d bytes, content length is %d", path, len(data), opts.ContentLength)
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(ctx, OpWrite, path, true); err != nil {
		return "", err
	}
	space := l.m.space(l.id)
	cur, exists := space[path]
	switch opts.Condition.Kind() {
	case ConditionAbsent:
		if exists {
			return "", fmt.Errorf("memory storage: %s exists: %w", path, ErrPreconditionFailed)
		}
	case ConditionVersion:
		if !exists || memoryVersion(cur) != opts.Condition.Version() {
			return "", fmt.Errorf("memory storage: %s is not at %s: %w", path, opts.Condition, ErrPreconditionFailed)
		}
	}
	space[path] = data
	l.m.times[[2]string{l.id, path}] = time.Now()
	l.m.written += int64(len(data))
	return memoryVersion(data), nil
}

// Copy implements Copier: the copy shares the source's content.
func (l *memoryLease) Copy(ctx context.Context, src, dst string) error {
	if err := ValidateStoragePath(src); err != nil {
		return err
	}
	if err := ValidateStoragePath(dst); err != nil {
		return err
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(ctx, OpCopy, dst, true); err != nil {
		return err
	}
	space := l.m.space(l.id)
	data, ok := space[src]
	if !ok {
		return fmt.Errorf("memory storage: %s: %w", src, ErrNotExist)
	}
	if _, exists := space[dst]; exists {
		return fmt.Errorf("memory storage: %s exists: %w", dst, ErrPreconditionFailed)
	}
	space[dst] = data
	l.m.times[[2]string{l.id, dst}] = time.Now()
	return nil
}

var _ InfoLister = (*memoryLease)(nil)

// ListInfo implements InfoLister.
func (l *memoryLease) ListInfo(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	paths, err := l.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	out := make([]ObjectInfo, 0, len(paths))
	for _, p := range paths {
		if data, ok := l.m.spaces[l.id][p]; ok {
			out = append(out, ObjectInfo{Path: p, Size: int64(len(data)), ModTime: l.m.times[[2]string{l.id, p}]})
		}
	}
	return out, nil
}

// List implements StorageLease.
func (l *memoryLease) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ValidateStoragePrefix(prefix); err != nil {
		return nil, err
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if err := l.check(ctx, OpList, prefix, false); err != nil {
		return nil, err
	}
	var out []string
	for p := range l.m.spaces[l.id] {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Delete implements StorageLease.
func (l *memoryLease) Delete(ctx context.Context, paths []string) error {
	for _, p := range paths {
		if err := ValidateStoragePath(p); err != nil {
			return err
		}
	}
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	for _, p := range paths {
		if err := l.check(ctx, OpDelete, p, true); err != nil {
			return err
		}
		delete(l.m.spaces[l.id], p)
	}
	return nil
}

// CheckLock implements LockChecker.
func (l *memoryLease) CheckLock(ctx context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.lost {
		return fmt.Errorf("memory storage: workspace %q: %w", l.id, ErrLockLost)
	}
	return nil
}

// Release implements StorageLease.
func (l *memoryLease) Release(ctx context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.released {
		if l.lost {
			return fmt.Errorf("memory storage: workspace %q: %w", l.id, ErrLockLost)
		}
		return nil
	}
	l.released = true
	if l.locked && l.m.locks[l.id] == l {
		delete(l.m.locks, l.id)
	}
	if l.lost {
		return fmt.Errorf("memory storage: workspace %q: %w", l.id, ErrLockLost)
	}
	return nil
}
