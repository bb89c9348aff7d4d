package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/journal"
)

const resumeUsage = `usage: aml resume RUN --journal DIR [--answer ID=VALUE]... [--answers FILE.json] [--rerun-changed] [flags]

Continues the journaled run RUN: the workflow recorded in the journal runs again from
the start, every recorded effect (agent sessions, scripts, tool calls, answers) is served
from the journal without running it, and the run continues live at the first effect with
no record. The workflow file, entry and limits are the recorded ones. Processes the
interrupted run left running are ended first. Edits that change no effect (comments,
helpers, renames) change nothing; before anything runs, the program is replayed dry and
every change is named: a recorded effect whose request changed (prompt, model, command,
an env() value, an included file), an effect inserted between recorded ones, a recorded
effect no longer reached. Each stops the resume, unless --rerun-changed is given: then a
change and what follows it in its sequential context run live, and the rest is served.

env() values are checked against the run's digests of them, which are keyed with the
journal key of the machine that recorded the run (the file AML_JOURNAL_KEY_FILE names,
else aml/journal.key in the user's config directory). Where that key is missing, a
warning says so and the run resumes without checking them.

Exit codes: 0 success, 1 failure, 2 usage error (a finished run, a run being resumed
elsewhere, a run whose journal cannot be read or whose journal.log is not a regular
file, an invalid answer), 4 the run waits for answers again.

Flags:
`

func cmdResume(args []string, stdout, stderr io.Writer) int {
	var (
		f            runFlags
		answers      answerFlags
		answersFile  string
		rerunChanged bool
	)
	fs := newFlagSet("resume", resumeUsage, stderr)
	fs.StringVar(&f.journal, "journal", "", "the journal directory the run was recorded in (required)")
	fs.Var(&answers, "answer", "answer a pending question: ID=VALUE (repeatable; VALUE is JSON unless the answer is text)")
	fs.StringVar(&answersFile, "answers", "", "answer pending questions from a JSON object file {ID: answer}")
	fs.BoolVar(&rerunChanged, "rerun-changed", false, "accept the changes found: run a changed or inserted effect, and everything after it in its sequential context, live instead of failing")
	f.outputFlags(fs)
	fs.StringVar(&f.report, "report", "", "write the report of the resumed run (one self-contained HTML page) to this file when it ends")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || f.journal == "" {
		fmt.Fprintln(stderr, "aml resume: want one run id and --journal DIR")
		fs.Usage()
		return exitUsage
	}
	// fail reports a resume that cannot start: on stderr, and under
	// --json as the envelope (AML_RUN_LOCKED when another process holds
	// the run).
	fail := func(format string, a ...any) int {
		err := fmt.Errorf(format, a...)
		if f.json {
			writeEnvelope(stdout, pos[0], 0, "", err, eval.Usage{})
		}
		fmt.Fprintf(stderr, "aml resume: %v\n", err)
		return exitUsage
	}
	// The run resumes in the directory it ran in: paths given here are
	// made absolute first.
	for _, p := range []*string{&f.journal, &answersFile, &f.traceFile, &f.report} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return fail("%w", err)
			}
			*p = abs
		}
	}
	run, err := journal.Open(f.journal, pos[0])
	if err != nil {
		return fail("%w", err)
	}
	defer run.Close()
	if t := run.Torn(); t != nil {
		fmt.Fprintf(stderr, "aml resume: the journal's last record was cut short by the crash (%d bytes at offset %d); it is ignored, and that effect runs again\n", t.Bytes, t.Offset)
	}
	meta := run.Meta()
	if run.State() == journal.Succeeded {
		return fail("run %s already finished: it succeeded; there is nothing to resume (start a new run with aml run)", run.ID())
	}
	var pending []eval.Question
	if run.State() == journal.Suspended {
		pending = run.Questions()
	}
	given, err := resumeAnswers(pending, answers, answersFile)
	if err != nil {
		return fail("%w; the run stays suspended", err)
	}
	var rf recordedFlags
	if len(meta.Options) > 0 {
		if err := json.Unmarshal(meta.Options, &rf); err != nil {
			return fail("the journal's run options cannot be read: %w", err)
		}
	}
	rf.apply(&f)
	// The digests of env() values are checked only with the key they
	// were made with; a run recorded before keys has plain digests.
	var (
		envKey    []byte
		unchecked string
	)
	if rf.JournalKey != "" {
		key, path, created, err := journalKey()
		if err != nil {
			return fail("%w", err)
		}
		envKey, unchecked = key, uncheckedReads(run.ID(), rf.JournalKey, key, path, created)
	}
	file := meta.Workflow
	if rf.Cwd != "" && rf.File != "" {
		if err := os.Chdir(rf.Cwd); err != nil {
			return fail("run %s ran in %s, which cannot be entered: %w", run.ID(), rf.Cwd, err)
		}
		file = rf.File
	}
	if _, err := os.Stat(file); err != nil {
		return fail("the run's workflow %s cannot be read: %w", meta.Workflow, err)
	}
	if unchecked != "" {
		fmt.Fprintf(stderr, "aml resume: %s\n", unchecked)
	}
	r := newRunner(&f, file, stdout, stderr)
	r.envKey = envKey
	defer r.close()
	r.reportLeftovers()
	defer listen(r.sigs)()
	wf, entry, rt, code := r.prepare()
	if rt == nil {
		return code
	}
	if wf.SourceDigest() != meta.WorkflowDigest {
		r.logger.Warnf("%s (or a module it loads) changed since run %s was recorded; effects whose requests did not change are served from the journal, and every change is named before anything runs", meta.Workflow, run.ID())
	}
	// What the killed run left running is ended before its effects run
	// again: an in-flight script's descendants would otherwise race the
	// one that replaces them.
	if n, err := endLeftovers(run.Owners()); err != nil {
		return fail("%w", err)
	} else if n > 0 {
		r.logger.Warnf("ended %d process(es) that the interrupted run of %s left running", n, run.ID())
	}
	if err := run.SetState(journal.StateRecord{State: journal.Running, At: time.Now(), Owner: procscope.Marker()}); err != nil {
		return fail("%w", err)
	}
	r.logger.Printf("resuming run %s from %s (%d recorded effects)", run.ID(), f.journal, len(run.Effects()))
	var (
		changeMu sync.Mutex
		changes  = map[string]bool{}
	)
	onChange := func(de *eval.DivergenceError) {
		d := de.Describe()
		changeMu.Lock()
		seen := changes[d]
		changes[d] = true
		changeMu.Unlock()
		if seen {
			return // the same change in another place of the run
		}
		what := "it runs live, with everything after it in its sequential context"
		if de.Kind == eval.ChangeRemoved {
			what = "its record is dropped, and everything after it in its sequential context runs live"
		}
		r.logger.Warnf("--rerun-changed: %s; %s", d, what)
	}
	return r.run(run.ID(), func(ctx context.Context) (string, error) {
		return rt.Resume(ctx, entry, eval.ResumeOptions{RunID: run.ID(), Journal: run, RerunChanged: rerunChanged, OnChange: onChange, Answers: given, Reads: wf.Reads(), SourceRoot: wf.SourceRoot(), UncheckedReads: unchecked != ""})
	}, redactOutcome(wf, r.recordOutcome(run)))
}

// uncheckedReads says why the env() values of run id, recorded with the
// key whose id is recorded, cannot be checked with key (made just now
// when created, at path), or "" when they can.
func uncheckedReads(id, recorded string, key []byte, path string, created bool) string {
	local := journal.KeyID(key)
	if local == recorded {
		return ""
	}
	has := fmt.Sprintf("this machine has journal key %s (%s)", local, path)
	if created {
		has = fmt.Sprintf("this machine had no journal key (a new one, %s, was made at %s)", local, path)
	}
	return fmt.Sprintf("env() values cannot be checked against run %s: it was recorded with journal key %s, and %s; the env() values the run recorded are used as they were, so a changed value goes unnoticed. To have them checked, copy the key file of the machine that recorded the run to %s (or point %s at a copy of it) and resume again", id, recorded, has, path, journal.KeyFileEnv)
}

// answerFlags collects repeated --answer ID=VALUE flags.
type answerFlags []string

func (a *answerFlags) String() string { return strings.Join(*a, ",") }

// Set implements flag.Value.
func (a *answerFlags) Set(s string) error {
	if i := strings.IndexByte(s, '='); i <= 0 {
		return fmt.Errorf("want ID=VALUE, got %q", s)
	}
	*a = append(*a, s)
	return nil
}

// resumeAnswers validates the answers given with --answer and --answers
// against the questions the run waits for.
func resumeAnswers(pending []eval.Question, flags answerFlags, file string) (map[string]any, error) {
	if len(flags) == 0 && file == "" {
		return nil, nil
	}
	byID := map[string]eval.Question{}
	ids := make([]string, 0, len(pending))
	for _, q := range pending {
		byID[q.ID] = q
		ids = append(ids, q.ID)
	}
	unknown := func(id string) error {
		if len(ids) == 0 {
			return fmt.Errorf("--answer %s: the run waits for no question", id)
		}
		return fmt.Errorf("--answer %s: the run waits for no question with that id; it waits for: %s", id, strings.Join(ids, ", "))
	}
	out := map[string]any{}
	given := map[string]string{} // id -> where it was given
	twice := func(id, where string) error {
		return fmt.Errorf("question %q is answered twice (%s and %s); an answer answers exactly one question: give it once", id, given[id], where)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--answers: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("--answers %s: want a JSON object of question id to answer: %w", file, err)
		}
		for id, v := range m {
			q, ok := byID[id]
			if !ok {
				return nil, unknown(id)
			}
			if err := eval.CheckAnswer(q, v); err != nil {
				return nil, err
			}
			out[id] = v
			given[id] = "in --answers " + file
		}
	}
	for _, a := range flags {
		id, raw, _ := strings.Cut(a, "=")
		q, ok := byID[id]
		if !ok {
			return nil, unknown(id)
		}
		if _, dup := given[id]; dup {
			return nil, twice(id, "--answer "+a)
		}
		given[id] = "--answer " + a
		v, err := parseAnswer(q, raw)
		if err != nil {
			return nil, err
		}
		out[id] = v
	}
	return out, nil
}

// leftoverWait bounds how long a resume waits for the processes it ended
// to be gone.
const leftoverWait = 10 * time.Second

// endLeftovers ends the processes that the dead aml processes named by
// owners (owner markers of a run's earlier runs and resumes) left
// running, waits until they are gone, and returns how many it ended.
// Owners that are alive, of another machine, or unknown are left alone.
func endLeftovers(owners []string) (int, error) {
	if !procscope.Supported() {
		return 0, nil
	}
	ended := map[int]bool{}
	deadline := time.Now().Add(leftoverWait)
	for _, o := range owners {
		if !procscope.MarkerGone(o) {
			continue
		}
		for {
			pids := procscope.Kill(procscope.OwnerVar, o)
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				ended[p] = true
			}
			if time.Now().After(deadline) {
				return len(ended), fmt.Errorf("processes %v that an earlier run left are still running %s after SIGKILL; end them and resume again", pids, leftoverWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return len(ended), nil
}
