// Package testbin builds the module's commands for tests, once per
// checkout and machine: the binaries live in a directory of the user's
// cache named for the checkout, the package and the build options, and
// each request runs go build on the same output path, which the go
// command mostly leaves alone when it is up to date (a fraction of a
// second against the seconds of a link). That path is never run: tests
// get a copy named for its content, which nothing writes again, so a
// build that rewrites the output in place never meets a running binary.
// Test processes of different packages that build the same command take
// turns through a lock file. Build is safe for concurrent use.
//
// A command with a companion (aml, whose companion aml-full it runs in
// its place for the services) is built with it, and the copy of the
// command has the companion's copy beside it, as go install places them;
// a static build (for containers) is built alone.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options are how a binary is built.
type Options struct {
	// Race builds with the race detector.
	Race bool
	// Static builds a static Linux binary (CGO_ENABLED=0, GOOS=linux),
	// one that runs in any Linux container.
	Static bool
}

// cacheBase is the user's cache directory as the test process started
// with it, whatever HOME or XDG_CACHE_HOME a test sets for itself later
// (a binary built under a test's temporary home would vanish with it).
var cacheBase = func() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return os.TempDir()
}()

// startEnv is the environment that places the go command's caches, as
// the test process started with it: a build under a test's temporary
// home would otherwise start from empty caches.
var startEnv = func() []string {
	var env []string
	for _, k := range []string{"HOME", "XDG_CACHE_HOME", "GOCACHE", "GOPATH", "GOMODCACHE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}()

// companions are the commands built and placed beside a command.
var companions = map[string][]string{
	"github.com/aml-go/aml/cmd/aml": {"github.com/aml-go/aml/cmd/aml-full"},
}

var (
	mu    sync.Mutex
	built = map[string]string{} // key → path, within this process
)

// Build returns the path of pkg's command (an import path of this module
// or another the module requires) built with opts, building it when the
// cached one is missing or out of date. It skips the test when there is
// no go command, and fails it when the build fails. The caller must not
// change or remove the file.
func Build(t testing.TB, pkg string, opts Options) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("this test needs the go command to build %s: %v", pkg, err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	args := []string{"build"}
	env := append(os.Environ(), startEnv...)
	if opts.Race {
		args = append(args, "-race")
	}
	if opts.Static {
		env = append(env, "CGO_ENABLED=0", "GOOS=linux")
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{root, pkg, fmt.Sprint(opts.Race, opts.Static)}, "\x00")))
	key := hex.EncodeToString(sum[:8])
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[key]; ok {
		return p
	}
	dir := filepath.Join(cacheBase, "aml-testbin", key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	defer unlock()
	pkgs := []string{pkg}
	if !opts.Static {
		// A static build goes into containers, as the agents' tool
		// relay, which the command serves without its companion.
		pkgs = append(pkgs, companions[pkg]...)
	}
	outs := make([]string, len(pkgs))
	for i, p := range pkgs {
		outs[i] = filepath.Join(dir, path.Base(p))
	}
	if len(pkgs) == 1 {
		args = append(args, "-o", outs[0], pkg)
	} else {
		args = append(append(args, "-o", dir+string(filepath.Separator)), pkgs...)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir, cmd.Env = root, env
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	final, err := pinned(outs...)
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	built[key] = final
	return final
}

// pinned returns the path of a copy of outs[0] named for the content
// of outs (a directory named for their hash, holding a file of each
// one's name, so that a command sees its own name and finds its
// companions beside it), made when missing, and removes the copies of
// other content not used for a day.
func pinned(outs ...string) (string, error) {
	h := sha256.New()
	for _, out := range outs {
		f, err := os.Open(out)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	copies := filepath.Join(filepath.Dir(outs[0]), "by-content")
	dir := filepath.Join(copies, hex.EncodeToString(h.Sum(nil)[:6]))
	// The command is copied last: its presence says the directory is
	// complete.
	for i := len(outs) - 1; i >= 0; i-- {
		final := filepath.Join(dir, filepath.Base(outs[i]))
		if _, err := os.Stat(final); err == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		tmp := fmt.Sprintf("%s.tmp-%d", final, os.Getpid())
		os.Remove(tmp)
		if err := copyFile(outs[i], tmp); err != nil {
			os.Remove(tmp)
			return "", err
		}
		if err := os.Rename(tmp, final); err != nil {
			os.Remove(tmp)
			return "", err
		}
	}
	final := filepath.Join(dir, filepath.Base(outs[0]))
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	old, _ := os.ReadDir(copies)
	for _, e := range old {
		p := filepath.Join(copies, e.Name())
		if fi, err := os.Stat(p); err == nil && p != dir && now.Sub(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(p) // a process running it keeps its file
		}
	}
	return final, nil
}

// BuildTo is Build, with the binary then placed at dst (a hard link when
// the file systems allow, else a copy), for a test that needs it in a
// directory of its own, for example one it mounts into a container.
func BuildTo(t testing.TB, pkg string, opts Options, dst string) {
	t.Helper()
	src := Build(t, pkg, opts)
	if err := os.Link(src, dst); err == nil {
		return
	}
	if err := copyFile(src, dst); err != nil {
		t.Fatalf("placing %s at %s: %v", pkg, dst, err)
	}
}

// copyFile copies src to a new executable file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// moduleRoot is the directory of this module's go.mod, found from this
// source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot find the module's directory")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", filepath.Dir(file))
		}
		dir = parent
	}
}
