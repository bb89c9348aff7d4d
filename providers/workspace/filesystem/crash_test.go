package filesystem

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

// The helper process: the test binary re-executed with helperEnv set.
const (
	helperEnv    = "AML_FS_WORKSPACE_HELPER"
	helperDir    = "AML_FS_WORKSPACE_DIR"
	helperTemp   = "AML_FS_WORKSPACE_TEMP"
	helperFormat = "AML_FS_WORKSPACE_FORMAT"
	helperStep   = "AML_FS_WORKSPACE_STEP"
)

// Generated trees: files f000..f<n> of size bytes in a few directories,
// each starting with "generation <g> file <i>\n" followed by noise.
const (
	crashFiles    = 48
	crashFileSize = 128 << 10
)

func generation(g, files, size int) persisttest.Tree {
	t := persisttest.Tree{}
	rng := rand.NewChaCha8([32]byte{byte(g), byte(g >> 8), byte(g >> 16), 1})
	for i := range files {
		dir := fmt.Sprintf("d%d", i%4)
		t[dir] = persisttest.File{Dir: true, Mode: 0o755}
		buf := make([]byte, size)
		rng.Read(buf)
		head := fmt.Sprintf("generation %d file %d\n", g, i)
		copy(buf, head)
		t[fmt.Sprintf("%s/f%03d", dir, i)] = persisttest.File{Data: string(buf), Mode: 0o644}
	}
	return t
}

// treeGeneration reports the generation of a restored tree and whether the
// tree is exactly that generation.
func treeGeneration(t persisttest.Tree) (int, bool) {
	f, ok := t["d0/f000"]
	if !ok {
		return -1, false
	}
	line, _, _ := strings.Cut(f.Data, "\n")
	g, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "generation "), " file 0"))
	if err != nil {
		return -1, false
	}
	return g, persisttest.DiffTrees(generation(g, crashFiles, crashFileSize), t) == ""
}

// runHelper runs one helper mode and returns the exit code.
func runHelper(mode string) int {
	ctx := context.Background()
	s, err := NewStorage(os.Getenv(helperDir))
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	opts := persist.Options{StoreOptions: persist.StoreOptions{Format: os.Getenv(helperFormat), TemporaryDirectory: os.Getenv(helperTemp)}}
	if step := os.Getenv(helperStep); step != "" {
		opts.Hooks.Step = func(s persist.Step) error {
			if string(s) == step {
				fmt.Println("at", s)
				select {} // wait to be killed
			}
			return nil
		}
	}
	p := persist.New(s, opts)
	switch mode {
	case "hold":
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", EvaluationID: "helper", Lock: true})
		var ce *eval.WorkspaceConflictError
		switch {
		case errors.As(err, &ce):
			fmt.Println("conflict")
			return 0
		case err != nil:
			fmt.Println("error:", err)
			return 2
		}
		fmt.Println("acquired")
		io.Copy(io.Discard, os.Stdin) // hold until stdin closes
		if err := l.Release(ctx); err != nil {
			fmt.Println("error:", err)
			return 2
		}
		return 0
	case "hold-other":
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "other", EvaluationID: "helper", Lock: true})
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		fmt.Println("acquired")
		io.Copy(io.Discard, os.Stdin) // hold until stdin closes
		if err := l.Release(ctx); err != nil {
			fmt.Println("error:", err)
			return 2
		}
		return 0
	case "save-loop":
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "ws", EvaluationID: "helper", Lock: true, Load: &eval.WorkspaceLoad{Revision: "current"}})
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		for g := 1000 * (1 + os.Getpid()%1000); ; g++ {
			persisttest.ClearDir(helperTB{}, l.Directory())
			persisttest.WriteTree(helperTB{}, l.Directory(), generation(g, crashFiles, crashFileSize))
			fmt.Println("saving", g)
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 2}}); err != nil {
				fmt.Println("error:", err)
				return 2
			}
			fmt.Println("saved", g)
		}
	}
	fmt.Println("error: unknown mode", mode)
	return 2
}

// helperTB lets the tree helpers run outside a test.
type helperTB struct{ testing.TB }

func (helperTB) Helper()           {}
func (helperTB) Fatal(args ...any) { fmt.Println(append([]any{"error:"}, args...)...); os.Exit(2) }
func (helperTB) Fatalf(f string, args ...any) {
	fmt.Printf("error: "+f+"\n", args...)
	os.Exit(2)
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, mode, dir, temp, format, step string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDir+"="+dir, helperTemp+"="+temp, helperFormat+"="+format, helperStep+"="+step)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// next returns the helper's next output line.
func (h *helper) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatal("helper exited early")
		}
		if strings.HasPrefix(line, "error:") {
			t.Fatalf("helper: %s", line)
		}
		return line
	case <-time.After(2 * time.Minute):
		t.Fatal("helper is silent")
	}
	return ""
}

// kill SIGKILLs the helper and reaps it.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
}

// checkAfterCrash acquires the workspace with a lock (taking over the dead
// helper's lock), checks that the index parses, that current restores to
// one complete generation, and returns that generation.
func checkAfterCrash(t *testing.T, e *persisttest.Env) int {
	t.Helper()
	x := e.StoredIndex("ws")
	if x == nil {
		t.Fatal("index missing after the crash")
	}
	l, err := e.TryAcquire("ws", true, persisttest.Current)
	if err != nil {
		t.Fatalf("acquire after the crash: %v", err)
	}
	defer e.Release(l)
	g, ok := treeGeneration(persisttest.ReadTree(t, l.Directory()))
	if !ok {
		t.Fatalf("current revision %s is not one complete generation (generation %d)", x.Current, g)
	}
	return g
}

// TestCrashKill kills a process in the middle of saves of a large tree
// (SIGKILL at varied moments, and at each protocol step) and checks that a
// fresh acquisition loads a complete revision and the index parses.
func TestCrashKill(t *testing.T) {
	for _, format := range persisttest.Formats {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			temp := t.TempDir()
			s, _ := NewStorage(dir)
			e := persisttest.NewEnv(t, s, persist.Options{StoreOptions: persist.StoreOptions{Format: format}})
			e.SaveTree("ws", generation(0, crashFiles, crashFileSize), 2)
			last := 0
			// Kills timed after a save started. Where a kill lands depends
			// on the machine's speed, so the varied delays are followed by
			// more kills (cycling through them) until one lands in the middle
			// of a save, within a generous number of attempts.
			delays := []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
			const maxKills = 64
			midSave, kills := 0, 0
			for ; kills < len(delays) || midSave == 0 && kills < maxKills; kills++ {
				d := delays[kills%len(delays)]
				h := startHelper(t, "save-loop", dir, temp, format, "")
				// Let one save complete, then kill during the next one.
				var g int
				for seen := 0; seen < 2; {
					if line := h.next(t); strings.HasPrefix(line, "saving ") {
						g, _ = strconv.Atoi(strings.TrimPrefix(line, "saving "))
						seen++
					}
				}
				time.Sleep(d) // the stimulus: the kill point within the save
				h.kill(t)
				// The last save started is g; the one before it completed.
				done := false
				for line := range h.lines {
					if n, ok := strings.CutPrefix(line, "saving "); ok {
						g, _ = strconv.Atoi(n)
						done = false
					}
					if line == fmt.Sprint("saved ", g) {
						done = true
					}
				}
				if !done {
					midSave++
				}
				got := checkAfterCrash(t, e)
				if got != g && got != g-1 {
					t.Fatalf("after a kill %v into save %d, current is generation %d", d, g, got)
				}
				last = got
			}
			t.Logf("%d of %d timed kills landed in the middle of a save", midSave, kills)
			if midSave == 0 {
				t.Fatalf("none of %d kills landed in the middle of a save", kills)
			}
			// Kills at each protocol step.
			for _, step := range []persist.Step{persist.StepAfterSnapshot, persist.StepArtifactObject, persist.StepAfterArtifactUpload, persist.StepBeforePublication, persist.StepAfterPublication, persist.StepDuringPrune} {
				h := startHelper(t, "save-loop", dir, temp, format, string(step))
				var g int
				for {
					line := h.next(t)
					if strings.HasPrefix(line, "saving ") {
						g, _ = strconv.Atoi(strings.TrimPrefix(line, "saving "))
					}
					if strings.HasPrefix(line, "at ") {
						break
					}
				}
				h.kill(t)
				got := checkAfterCrash(t, e)
				published := step == persist.StepAfterPublication || step == persist.StepDuringPrune
				if published && got != g || !published && got != last {
					t.Fatalf("killed at %s of save %d: current is generation %d, want %d", step, g, got, map[bool]int{true: g, false: last}[published])
				}
				last = got
			}
			// The store still works.
			e.SaveTree("ws", generation(1, crashFiles, crashFileSize), 1)
			if got := checkAfterCrash(t, e); got != 1 {
				t.Fatalf("generation %d after recovery", got)
			}
		})
	}
}

// TestTwoProcessConflict starts two processes that lock the same
// workspace: exactly one gets WorkspaceConflictError.
func TestTwoProcessConflict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	temp := t.TempDir()
	for round := range 3 {
		a := startHelper(t, "hold", dir, temp, "", "")
		b := startHelper(t, "hold", dir, temp, "", "")
		got := []string{a.next(t), b.next(t)}
		acquired, conflicts := 0, 0
		for _, g := range got {
			switch g {
			case "acquired":
				acquired++
			case "conflict":
				conflicts++
			}
		}
		if acquired != 1 || conflicts != 1 {
			t.Fatalf("round %d: results %q, want one acquired and one conflict", round, got)
		}
		a.stdin.Close()
		b.stdin.Close()
		if err := a.cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := b.cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}
