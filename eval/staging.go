package eval

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
)

// staging is an agent's invocation-private, writable directory for
// oversized includes and skills. Outside a sandbox it is a host temporary
// directory; inside one it is the sandbox runtime's file staging, so that
// the agent sees it even when the sandbox is read-only. It is created on
// first use and removed exactly once when the agent's session ends, on
// every path.
type staging struct {
	mu sync.Mutex
	// gate, when set, serializes the creation of a sandbox staging
	// instead of mu (see root).
	gate Semaphore
	n    int
	done bool
	// rt is the sandbox runtime to stage into, or nil for the host.
	rt  SandboxRuntime
	dir string
	fs  FileStaging
	// tmp makes and removes host staging directories: Options.Host's
	// (see hostTemp), else the os package's.
	tmp hostTemp
}

// hostStagingDir returns the host directory of the plan's staging area,
// or "" when nothing was staged on the host.
func (p *agentPlan) hostStagingDir() string {
	if p == nil || p.staging == nil {
		return ""
	}
	s := p.staging
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt != nil {
		return ""
	}
	return s.dir
}

// hostTemp is the optional pair of methods through which Options.Host
// makes the evaluator's host staging directories, so that the host can
// find what a killed process left (the local sandbox records the owner
// beside each directory).
type hostTemp interface {
	MkdirTemp(prefix string) (string, error)
	RemoveAll(dir string) error
}

// osTemp makes host staging directories with the os package.
type osTemp struct{}

func (osTemp) MkdirTemp(prefix string) (string, error) { return os.MkdirTemp("", prefix) }
func (osTemp) RemoveAll(dir string) error              { return os.RemoveAll(dir) }

func (p *agentPlan) stagingArea() *staging {
	if p.staging == nil {
		p.staging = &staging{tmp: osTemp{}}
		if p.sb != nil {
			p.staging.rt, p.staging.gate = p.sb.rt, p.gate
		}
		if t, ok := p.host.(hostTemp); ok {
			p.staging.tmp = t
		}
	}
	return p.staging
}

// stage writes data under the agent's staging root and returns the
// agent-visible path of the copy.
func (p *agentPlan) stage(ctx context.Context, name string, data []byte) (string, error) {
	s := p.stagingArea()
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	return s.write(ctx, "includes/"+strconv.Itoa(n)+"/"+name, data, 0o600)
}

// stageFile creates the staged file of an oversized include in a host
// staging area and returns it open for writing, with its path.
func (p *agentPlan) stageFile(ctx context.Context, name string) (*os.File, string, error) {
	s := p.stagingArea()
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	root, err := s.root(ctx)
	if err != nil {
		return nil, "", err
	}
	full := filepath.Join(root, "includes", strconv.Itoa(n), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", err
	}
	return f, full, nil
}

// root returns the agent-visible staging directory, creating it when
// needed.
func (s *staging) root(ctx context.Context) (string, error) {
	if s.rt != nil && s.gate != nil {
		// The sandbox's staging is created through its runtime, which
		// may wait (an activity in workflow code): the creation is
		// serialized by the Executor's semaphore, never by a mutex held
		// while another branch would block on it.
		if err := s.gate.Acquire(ctx); err != nil {
			return "", fmt.Errorf("creating the agent's staging area in the sandbox: %w", err)
		}
		defer s.gate.Release()
		s.mu.Lock()
		done, fs := s.done, s.fs
		s.mu.Unlock()
		if done {
			return "", fmt.Errorf("the agent's staging area was already released")
		}
		if fs == nil {
			var err error
			if fs, err = s.rt.CreateFileStaging(ctx); err != nil {
				return "", fmt.Errorf("creating the agent's staging area in the sandbox: %w", err)
			}
			s.mu.Lock()
			s.fs = fs
			s.mu.Unlock()
		}
		return fs.Root(), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return "", fmt.Errorf("the agent's staging area was already released")
	}
	if s.rt != nil {
		if s.fs == nil {
			fs, err := s.rt.CreateFileStaging(ctx)
			if err != nil {
				return "", fmt.Errorf("creating the agent's staging area in the sandbox: %w", err)
			}
			s.fs = fs
		}
		return s.fs.Root(), nil
	}
	if s.dir == "" {
		if s.tmp == nil {
			s.tmp = osTemp{}
		}
		dir, err := s.tmp.MkdirTemp("aml-agent-")
		if err != nil {
			return "", err
		}
		s.dir = dir
	}
	return s.dir, nil
}

// write stores data at rel (slash-separated) below the staging root and
// returns its agent-visible path. perm applies on the host; sandbox
// stagings keep their own modes.
func (s *staging) write(ctx context.Context, rel string, data []byte, perm os.FileMode) (string, error) {
	root, err := s.root(ctx)
	if err != nil {
		return "", err
	}
	if s.rt != nil {
		if err := s.fs.WriteFile(ctx, rel, data); err != nil {
			return "", err
		}
		return path.Join(root, rel), nil
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(full, data, perm); err != nil {
		return "", err
	}
	return full, nil
}

// release removes the staging directory; later calls do nothing. It runs
// even after ctx was cancelled (it keeps only ctx's values, for an
// executor's providers), bounded by CleanupTimeout.
func (s *staging) release(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	switch {
	case s.fs != nil:
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
		defer cancel()
		if err := s.fs.Release(ctx); err != nil {
			return fmt.Errorf("releasing the agent's staging area in the sandbox: %w", err)
		}
	case s.dir != "":
		if err := s.tmp.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("removing the agent's staging area %s: %w", s.dir, err)
		}
	}
	return nil
}
