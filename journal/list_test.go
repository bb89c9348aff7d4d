package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// The helper process: TestHelperProcess, re-executed with these
// variables set, opens a run and holds it.
const (
	helperEnv    = "JOURNAL_TEST_HELPER" // "hold": hold until stdin closes; "crash": record, sync, hold until killed
	helperDirEnv = "JOURNAL_TEST_DIR"
	helperRunEnv = "JOURNAL_TEST_RUN"
)

// helperEffect is the effect the "crash" helper records and syncs.
var helperEffect = agentEffect(7, `{"text":"from the helper"}`)

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	r, err := Open(os.Getenv(helperDirEnv), os.Getenv(helperRunEnv))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if mode == "crash" {
		if err := r.Record(helperEffect); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if err := r.Sync(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		// Appended, never synced nor flushed: lost in the crash.
		r.Record(agentEffect(8, `{}`))
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	if err := r.Close(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// holdInChild starts the helper process holding run id in dir and waits
// until it holds it. Closing the returned writer lets it close the run
// and exit.
func holdInChild(t *testing.T, mode, dir, id string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir, helperRunEnv+"="+id)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("the helper process did not take the run: %q, %v", line, err)
	}
	return cmd, stdin
}

func stateOf(t *testing.T, dir, id string) Summary {
	t.Helper()
	sums, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sums {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("List does not list run %s", id)
	return Summary{}
}

func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	id := r.ID()
	mustClose(t, r)

	cmd, stdin := holdInChild(t, "hold", dir, id)
	_, err := Open(dir, id)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("Open of a run another process holds: %v, want ErrLocked", err)
	}
	if s := stateOf(t, dir, id); s.State != Running {
		t.Errorf("List: a run another process holds is %q, want running", s.State)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the helper process: %v", err)
	}
	if s := stateOf(t, dir, id); s.State != Interrupted {
		t.Errorf("List: a released run left running is %q, want interrupted", s.State)
	}
	mustClose(t, mustOpen(t, dir, id))
}

// TestCrash kills a process that holds a run: the kernel releases the
// lock, the run lists as interrupted and what it synced survives.
func TestCrash(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	id := r.ID()
	mustClose(t, r)

	cmd, _ := holdInChild(t, "crash", dir, id)
	if s := stateOf(t, dir, id); s.State != Running {
		t.Errorf("List: a run another process holds is %q, want running", s.State)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s := stateOf(t, dir, id)
	if s.State != Interrupted || s.Effects != 1 || s.LastEffect == nil || s.LastEffect.ID != helperEffect.ID {
		t.Errorf("List after the crash: %+v, want interrupted with the synced effect", s)
	}
	r = mustOpen(t, dir, id)
	defer r.Close()
	sameEffect(t, "the effect synced before the crash", r.Lookup(helperEffect.ID), helperEffect)
	if r.Lookup(agentEffect(8, "").ID) != nil {
		t.Error("an effect never synced nor flushed survived the crash")
	}
}

func TestListAndPrune(t *testing.T) {
	dir := t.TempDir()
	qs := []eval.Question{{ID: "approve", Text: "Ship it?", Source: "review.star:30:9"}}
	runs := map[string]string{} // state name to run id
	newRun := func(name string, st *StateRecord, keepOpen bool, effects ...*eval.Effect) *Run {
		r := mustCreate(t, dir)
		mustRecord(t, r, effects...)
		if err := r.Sync(); err != nil {
			t.Fatal(err)
		}
		if st != nil {
			if err := r.SetState(*st); err != nil {
				t.Fatal(err)
			}
		}
		if !keepOpen {
			mustClose(t, r)
		}
		runs[name] = r.ID()
		return r
	}
	running := newRun("running", nil, true, agentEffect(1, `{}`))
	defer running.Close()
	newRun("interrupted", nil, false, agentEffect(1, `{}`), agentEffect(2, `{}`))
	newRun("suspended", &StateRecord{State: Suspended, Questions: qs}, false, agentEffect(1, `{}`))
	newRun("failed", &StateRecord{State: Failed, Error: "boom"}, false, agentEffect(1, `{}`), agentEffect(1, `{"again":true}`))
	newRun("succeeded", &StateRecord{State: Succeeded}, false)
	finishedOpen := newRun("finished but held", &StateRecord{State: Succeeded}, true)
	defer finishedOpen.Close()
	// Entries that are not runs.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "empty"), 0o700)
	os.Mkdir(filepath.Join(dir, ".hidden"), 0o700)

	sums, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, id := range runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var got []string
	byID := map[string]Summary{}
	for _, s := range sums {
		got = append(got, s.ID)
		byID[s.ID] = s
		if s.ReadErr != nil {
			t.Errorf("run %s: %v", s.ID, s.ReadErr)
		}
		if s.Workflow != "review.star" || !s.Started.Equal(testMeta().Started) || s.LastAt.Before(time.Now().Add(-time.Minute)) {
			t.Errorf("run %s: Workflow %q, Started %v, LastAt %v", s.ID, s.Workflow, s.Started, s.LastAt)
		}
	}
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("List lists %v, want the runs sorted: %v", got, ids)
	}
	for name, want := range map[string]State{"running": Running, "interrupted": Interrupted, "suspended": Suspended, "failed": Failed, "succeeded": Succeeded, "finished but held": Running} {
		if s := byID[runs[name]]; s.State != want {
			t.Errorf("the %s run lists as %q, want %q", name, s.State, want)
		}
	}
	if s := byID[runs["suspended"]]; !reflect.DeepEqual(s.Questions, qs) {
		t.Errorf("the suspended run's questions: %+v, want %+v", s.Questions, qs)
	}
	if s := byID[runs["failed"]]; s.Error != "boom" || s.Effects != 2 || s.LastEffect == nil || string(s.LastEffect.Result) != `{"again":true}` || s.LastEffect.Kind != "agent" {
		t.Errorf("the failed run: %+v, want its error, 2 effects and the last one", s)
	}
	if s := byID[runs["interrupted"]]; s.Effects != 2 || s.Questions != nil || s.Error != "" {
		t.Errorf("the interrupted run: %+v", s)
	}
	if s := byID[runs["succeeded"]]; s.Effects != 0 || s.LastEffect != nil {
		t.Errorf("the succeeded run: %+v", s)
	}

	removed, err := Prune(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{runs["failed"], runs["succeeded"]}
	slices.Sort(want)
	if !reflect.DeepEqual(removed, want) {
		t.Errorf("Prune removed %v, want %v (failed and succeeded)", removed, want)
	}
	for name, id := range runs {
		_, err := os.Stat(filepath.Join(dir, id))
		if gone := err != nil; gone != slices.Contains(want, id) {
			t.Errorf("after Prune the %s run: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("Prune removed an entry that is not a run: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), pruningPrefix) {
			t.Errorf("Prune left %s", e.Name())
		}
	}
	if sums, _ := List(dir); len(sums) != 4 {
		t.Errorf("List after Prune: %d runs, want 4", len(sums))
	}

	// Once released, the finished run is pruned; a removal a crash left
	// half done is finished.
	mustClose(t, finishedOpen)
	os.MkdirAll(filepath.Join(dir, pruningPrefix+"x", "y"), 0o700)
	removed, err = Prune(dir)
	if err != nil || !reflect.DeepEqual(removed, []string{runs["finished but held"]}) {
		t.Errorf("the second Prune: %v, %v; want the released run", removed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, pruningPrefix+"x")); err == nil {
		t.Error("Prune left a half-removed run")
	}
}

// TestPruneKeepsResumed: a run that was finished when listed but is
// held and resumed by the time Prune locks it is kept.
func TestPruneKeepsResumed(t *testing.T) {
	dir := t.TempDir()
	r := mustCreate(t, dir)
	if err := r.SetState(StateRecord{State: Failed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r)
	r = mustOpen(t, dir, r.ID())
	if err := r.SetState(StateRecord{State: Running}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, r) // interrupted now
	if removed, err := Prune(dir); err != nil || len(removed) != 0 {
		t.Errorf("Prune removed %v (%v), want nothing", removed, err)
	}
	if ok, err := pruneRun(dir, r.ID()); ok || err != nil {
		t.Errorf("pruneRun of a resumed run: %v, %v", ok, err)
	}
}
