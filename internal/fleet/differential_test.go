package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// The differential test: every golden workflow of testdata/eval, every
// offline example and the cases of testdata/differential run both with
// aml run and with aml run --temporal (two aml worker processes), and the
// two must print the same result, the same error (with its traceback)
// and exit with the same code. A difference is either fixed or listed in
// docs/distributed-runs.md's "Where a run on Temporal differs", with its reason; a
// listed case that gives the local answer fails the test, so that the
// list stays true. It runs against the server as this package tunes it
// and as users run it (Temporal's own dynamic configuration).

// differentialTimeout bounds one run of one case.
const differentialTimeout = 90 * time.Second

// listedTimeout bounds a run of a case docs/distributed-runs.md lists as differing.
const listedTimeout = 20 * time.Second

// differentialParallel is how many cases run at once.
const differentialParallel = 3

// storeEnv names the variable of the revision store that
// examples/workspace_revisions.star keeps its counter in; every run of
// that example starts from an empty one.
const storeEnv = "AML_STORE"

// offlineExamples leaves out the examples that need what a test machine
// lacks, with the reason.
var notOffline = map[string]string{
	"codex.star":        "needs Codex and an OpenAI key",
	"opencode.star":     "needs OpenCode and a model credential",
	"workspace_s3.star": "needs an S3 bucket and credentials",
	"review_live.star":  "needs OpenCode and a model endpoint",
}

// diffCase is one workflow of the corpus: the tree it runs in (copied
// afresh for each run, since examples keep state in their directory)
// and its path in that tree.
type diffCase struct {
	// name is the case's path relative to the repository.
	name string
	// root is the directory copied for each run, as mount below the
	// directory the run starts in ("" for that directory itself); rel
	// is the file the run names, relative to that directory.
	root, mount, rel string
	// fresh copies root for every run of this case, not once per mode.
	fresh bool
	// listed marks a case docs/distributed-runs.md lists as differing.
	listed bool
}

// outcome is what one run printed.
type diffOutcome struct {
	stdout, stderr string
	code           int
}

func (o diffOutcome) String() string {
	return fmt.Sprintf("exit %d\n-- stdout --\n%s-- stderr --\n%s", o.code, o.stdout, o.stderr)
}

// corpus lists the cases, relative to the repository root.
func corpus(t *testing.T, repo string) []diffCase {
	t.Helper()
	var cases []diffCase
	evalDir := filepath.Join(repo, "testdata", "eval")
	stars, _ := filepath.Glob(filepath.Join(evalDir, "*.star"))
	for _, s := range stars {
		if _, err := os.Stat(strings.TrimSuffix(s, ".star") + ".golden"); err != nil {
			continue
		}
		cases = append(cases, diffCase{name: "testdata/eval/" + filepath.Base(s), root: evalDir, rel: filepath.Base(s)})
	}
	if len(cases) < 200 {
		t.Fatalf("%d golden workflows in %s", len(cases), evalDir)
	}
	// The examples run from the repository's root, as the README runs
	// them; the differential cases from their own directory.
	for _, dir := range []string{"examples", filepath.Join("testdata", "differential")} {
		root := filepath.Join(repo, dir)
		mount := ""
		if dir == "examples" {
			mount = "examples"
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".star") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if _, skip := notOffline[rel]; skip && dir == "examples" {
				return nil
			}
			if strings.Contains(rel, string(filepath.Separator)+"skills"+string(filepath.Separator)) || strings.HasPrefix(rel, "lib"+string(filepath.Separator)) {
				return nil // modules that others load
			}
			cases = append(cases, diffCase{name: filepath.ToSlash(filepath.Join(dir, rel)), root: root, mount: mount, rel: filepath.Join(mount, rel), fresh: true})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return cases
}

// exceptionsHeading is the section of docs/distributed-runs.md that lists the documented
// differences.
const exceptionsHeading = "## Where a run on Temporal differs"

var exceptionLine = regexp.MustCompile("^- `([^`]+\\.star)`: (.+)$")

// documentedExceptions reads docs/distributed-runs.md's list of the cases whose run on
// Temporal differs, with the reasons.
func documentedExceptions(t *testing.T, repo string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "docs", "distributed-runs.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == exceptionsHeading:
			in = true
		case in && strings.HasPrefix(line, "#"):
			in = false
		case in:
			if m := exceptionLine.FindStringSubmatch(line); m != nil {
				out[m[1]] = m[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalizer makes two runs' outputs comparable: the directory a run ran
// in, random ids and run ids are replaced by placeholders.
var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	tempPattern = regexp.MustCompile(`/tmp/[^\s"':]*`)
)

func normalize(s, root string) string {
	s = strings.ReplaceAll(s, root, "$ROOT")
	s = uuidPattern.ReplaceAllString(s, "<uuid>")
	s = tempPattern.ReplaceAllString(s, "<tmp>")
	return s
}

// copyTree copies the regular files, directories and symbolic links of
// src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, info.Mode().Perm())
		}
		return nil // FIFOs and the like stay behind
	})
}

// runner runs the cases of one mode (in process, or on one server).
type diffRunner struct {
	bin  string
	args []string // after "run"
	env  []string // added to the test's environment
	// store is the revision store of examples/workspace_revisions.star
	// in this mode (storeEnv), emptied before each of its runs.
	store string
	// trees are the copies of each root made for this mode.
	mu    sync.Mutex
	trees map[string]string
	base  string
}

// tree returns the copy of c's root this run uses.
func (r *diffRunner) tree(t *testing.T, c diffCase) (string, error) {
	if c.fresh {
		dir, err := os.MkdirTemp(r.base, "case-")
		if err != nil {
			return "", err
		}
		return dir, copyTree(c.root, filepath.Join(dir, c.mount))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if dir, ok := r.trees[c.root]; ok {
		return dir, nil
	}
	dir, err := os.MkdirTemp(r.base, "tree-")
	if err != nil {
		return "", err
	}
	if err := copyTree(c.root, dir); err != nil {
		return "", err
	}
	if r.trees == nil {
		r.trees = map[string]string{}
	}
	r.trees[c.root] = dir
	return dir, nil
}

// caseLocks holds one lock per case name: a case may name a fixed path
// outside its tree (testdata/eval/resources_twins.star names an absolute
// workspace store), so two runs of one case, in two modes or against two
// servers, never overlap.
var caseLocks sync.Map

// run runs c and returns what it printed, normalized.
func (r *diffRunner) run(t *testing.T, c diffCase, onTimeout func()) diffOutcome {
	mu, _ := caseLocks.LoadOrStore(c.name, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	dir, err := r.tree(t, c)
	if err != nil {
		return diffOutcome{code: -1, stderr: "copying the case: " + err.Error()}
	}
	if c.name == "examples/workspace_revisions.star" {
		if err := os.RemoveAll(r.store); err != nil {
			return diffOutcome{code: -1, stderr: "emptying the store: " + err.Error()}
		}
	}
	timeout := differentialTimeout
	if c.listed {
		// A listed case need not end: it only must not agree.
		timeout = listedTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append(append([]string{"run", "--quiet"}, r.args...), c.rel)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), r.env...), storeEnv+"="+r.store)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		if onTimeout != nil {
			onTimeout()
		}
		return diffOutcome{code: -1, stderr: fmt.Sprintf("did not end within %s\n%s", timeout, normalize(stderr.String(), dir))}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return diffOutcome{code: -1, stderr: err.Error()}
	}
	return diffOutcome{stdout: normalize(stdout.String(), dir), stderr: normalize(stderr.String(), dir), code: code}
}

// runAll runs every case of cases, differentialParallel at a time.
func (r *diffRunner) runAll(t *testing.T, cases []diffCase, onTimeout func()) []diffOutcome {
	out := make([]diffOutcome, len(cases))
	sem := make(chan struct{}, differentialParallel)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = r.run(t, c, onTimeout)
		}()
	}
	wg.Wait()
	return out
}

// TestDistributedAgreesWithLocal is the differential test (see above).
func TestDistributedAgreesWithLocal(t *testing.T) {
	if _, err := temporaltest.Binary(); err != nil {
		t.Skip(err.Error())
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cases := corpus(t, repo)
	listed := documentedExceptions(t, repo)
	if only := os.Getenv("AML_DIFFERENTIAL_ONLY"); only != "" {
		// A regexp of case names, to run a few while working on them;
		// the exceptions the docs list are then not all checked.
		re, err := regexp.Compile(only)
		if err != nil {
			t.Fatalf("AML_DIFFERENTIAL_ONLY: %v", err)
		}
		cases = slices.DeleteFunc(cases, func(c diffCase) bool { return !re.MatchString(c.name) })
		for name := range listed {
			if !re.MatchString(name) {
				delete(listed, name)
			}
		}
	}
	for name := range listed {
		i := slices.IndexFunc(cases, func(c diffCase) bool { return c.name == name })
		if i < 0 {
			t.Errorf("docs/distributed-runs.md lists %s as differing on Temporal, but it is not in the corpus", name)
			continue
		}
		cases[i].listed = true
	}
	bin := buildAML(t)
	base := t.TempDir()
	t.Setenv("AML_JOURNAL_KEY_FILE", filepath.Join(base, "journal.key"))
	started := time.Now()
	local := (&diffRunner{bin: bin, base: base, store: filepath.Join(base, "store-local")}).runAll(t, cases, nil)
	t.Logf("%d cases in process in %s", len(cases), time.Since(started).Round(time.Millisecond))

	for _, cfg := range []struct {
		name string
		opts temporaltest.Options
	}{{"tuned", temporaltest.Options{}}, {"stock", temporaltest.Options{Stock: true}}} {
		t.Run(cfg.name, func(t *testing.T) {
			// The two servers run at once: the cases mostly wait.
			t.Parallel()
			srv := temporaltest.StartWith(t, cfg.opts)
			c := srv.Dial(t)
			blobs := filepath.Join(t.TempDir(), "blobs")
			if err := os.Mkdir(blobs, 0o755); err != nil {
				t.Fatal(err)
			}
			// The workers read env() (the store of an example), so they
			// get the mode's store too.
			store := filepath.Join(t.TempDir(), "store")
			env := []string{"AML_TEMPORAL_BLOB_STORE=" + blobs, storeEnv + "=" + store}
			// The workers run in a directory of their own, as on other
			// machines: the cases' relative paths mean the submitter's.
			workDir := t.TempDir()
			startWorkersIn(t, bin, srv.Address, workDir, env)
			// A run that does not end is terminated, so that it stops
			// taking the workers' time.
			terminateStale := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
					Namespace: temporaltest.Namespace, Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", temporal.WorkflowName)})
				if err != nil {
					return
				}
				for _, e := range resp.Executions {
					if e.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && time.Since(e.GetStartTime().AsTime()) > differentialTimeout-5*time.Second {
						_ = c.TerminateWorkflow(ctx, e.Execution.GetWorkflowId(), "", "the differential test's run did not end")
					}
				}
			}
			started := time.Now()
			remote := (&diffRunner{bin: bin, base: base, args: []string{"--temporal", srv.Address}, env: env, store: store}).runAll(t, cases, terminateStale)
			t.Logf("%d cases on Temporal (%s) in %s", len(cases), cfg.name, time.Since(started).Round(time.Millisecond))
			var same, differ, listedSame int
			var diffs []string
			for i, cs := range cases {
				equal := local[i] == remote[i]
				reason, isListed := listed[cs.name]
				switch {
				case equal && isListed:
					listedSame++
					t.Errorf("%s is listed in docs/distributed-runs.md as differing on Temporal (%s), but it gives the local answer: take it off the list", cs.name, reason)
				case equal:
					same++
				case isListed:
					differ++
				default:
					diffs = append(diffs, fmt.Sprintf("%s:\nin process:\n%s\non Temporal:\n%s", cs.name, local[i], remote[i]))
				}
			}
			sort.Strings(diffs)
			for _, d := range diffs {
				t.Error(d)
			}
			t.Logf("%d cases: %d give the local answer, %d differ as docs/distributed-runs.md lists, %d differ unlisted", len(cases), same, differ, len(diffs))
		})
	}
}

// startWorkersIn starts two aml worker processes in dir, with env added
// to the test's environment, stopped when the test ends (their stderr
// shown if it failed).
func startWorkersIn(t *testing.T, bin, address, dir string, env []string) {
	t.Helper()
	for _, name := range []string{"a", "b"} {
		cmd := exec.Command(bin, "worker", "--temporal", address)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var stderr lockedWriter
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("worker %s:\n%s", name, stderr.tail(8000))
			}
		})
	}
}

// lockedWriter keeps a process's output for a failing test's log.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
