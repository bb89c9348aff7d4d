package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/starlib"
)

// recordedFlags are the run flags a journal keeps, so that aml resume
// needs no file argument and evaluates the program as it ran.
type recordedFlags struct {
	// File is the workflow path as given and Cwd the working directory
	// of the run: effect identities hold source positions, which name
	// files as the run loaded them, and host scripts ran in Cwd, so a
	// resume loads the same path from the same directory.
	File          string `json:"file"`
	Cwd           string `json:"cwd"`
	Entry         string `json:"entry,omitempty"`
	EnvFile       string `json:"runtimeEnvFile,omitempty"`
	MaxAgentCalls *int   `json:"maxAgentCalls,omitempty"`
	MaxConcurrent *int   `json:"maxConcurrentAgents,omitempty"`
	MaxDepth      *int   `json:"maxDepth,omitempty"`
	MaxTurns      *int   `json:"maxTurnsPerAgent,omitempty"`
	MaxSteps      *int   `json:"maxSteps,omitempty"`
	MaxPrompt     *int   `json:"maxPromptBytes,omitempty"`
	// JournalKey is the id (journal.KeyID) of the key the digests of the
	// run's env() values were made with; "" for a run recorded before
	// digests were keyed, whose digests are plain SHA-256.
	JournalKey string `json:"journalKey,omitempty"`
}

// journalKey returns this machine's journal key (journal.KeyPath),
// made on first use, with its path.
func journalKey() (key []byte, path string, created bool, err error) {
	if path, err = journal.KeyPath(); err != nil {
		return nil, "", false, err
	}
	key, created, err = journal.LoadKey(path)
	return key, path, created, err
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

func recordFlags(f *runFlags) recordedFlags {
	opt := func(l limitFlag) *int {
		if !l.set {
			return nil
		}
		v := l.v
		return &v
	}
	cwd, _ := os.Getwd()
	return recordedFlags{Cwd: cwd, Entry: f.entry, EnvFile: f.envFile, MaxAgentCalls: opt(f.maxAgentCalls), MaxConcurrent: opt(f.maxConcurrent),
		MaxDepth: opt(f.maxDepth), MaxTurns: opt(f.maxTurns), MaxSteps: opt(f.maxSteps), MaxPrompt: opt(f.maxPromptBytes)}
}

// apply restores the recorded flags into f.
func (rf recordedFlags) apply(f *runFlags) {
	f.entry, f.envFile = rf.Entry, rf.EnvFile
	set := func(dst *limitFlag, v *int) {
		if v != nil {
			dst.v, dst.set = *v, true
		}
	}
	set(&f.maxAgentCalls, rf.MaxAgentCalls)
	set(&f.maxConcurrent, rf.MaxConcurrent)
	set(&f.maxDepth, rf.MaxDepth)
	set(&f.maxTurns, rf.MaxTurns)
	set(&f.maxSteps, rf.MaxSteps)
	set(&f.maxPromptBytes, rf.MaxPrompt)
}

// runJournaled runs entry as a new durable run in --journal DIR.
func (r *runner) runJournaled(rt *eval.Runtime, wf *starlib.Workflow, entry any) int {
	abs, err := filepath.Abs(r.file)
	if err != nil {
		r.logger.Error(err.Error())
		return exitUsage
	}
	digest := wf.SourceDigest()
	rf := recordFlags(r.f)
	rf.File = r.file
	rf.JournalKey = journal.KeyID(r.envKey)
	flags, err := json.Marshal(rf)
	if err != nil {
		r.logger.Error(err.Error())
		return exitUsage
	}
	run, err := journal.Create(r.f.journal, journal.Meta{Workflow: abs, WorkflowDigest: digest, Entry: r.f.entry, Options: flags, Started: time.Now(), Owner: procscope.Marker()})
	if err != nil {
		r.logger.Error(fmt.Sprintf("--journal: %v", err))
		return exitUsage
	}
	defer run.Close()
	r.logger.Printf("run %s is journaled in %s; after a crash, continue it with: aml resume %s --journal %s", run.ID(), r.f.journal, run.ID(), r.f.journal)
	return r.run(run.ID(), func(ctx context.Context) (string, error) {
		return rt.Evaluate(ctx, entry, eval.EvaluateOptions{RunID: run.ID(), Journal: run, Reads: wf.Reads(), SourceRoot: wf.SourceRoot()})
	}, redactOutcome(wf, r.recordOutcome(run)))
}

// recordOutcome returns the hook that writes a run's end state to its
// journal; the error it records was redacted (redactOutcome).
func (r *runner) recordOutcome(run *journal.Run) func(outcome) outcome {
	return func(res outcome) outcome {
		st := journal.StateRecord{State: journal.Succeeded, At: time.Now()}
		var se *eval.SuspendedError
		switch {
		case errors.As(res.err, &se):
			st.State, st.Questions = journal.Suspended, se.Questions
		case res.err != nil:
			st.State, st.Error = journal.Failed, res.err.Error()
		default:
			st.Result = res.text
		}
		if err := run.SetState(st); err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("recording the run's end in the journal: %w", err))
		}
		return res
	}
}

// reportSuspended prints the questions a suspended run waits for and how
// to answer them.
func (r *runner) reportSuspended(runID string, dur time.Duration, se *eval.SuspendedError) {
	if r.f.json {
		writeEnvelope(r.stdout, runID, dur, "", se, r.spent, map[string]any{"suspended": true, "questions": se.Questions})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s is waiting for %d answer(s):\n", runID, len(se.Questions))
	for _, q := range se.Questions {
		fmt.Fprintf(&b, "  %s", q.ID)
		if q.Source != "" {
			fmt.Fprintf(&b, " (asked at %s)", q.Source)
		}
		fmt.Fprintf(&b, ": %s\n", q.Text)
		fmt.Fprintf(&b, "    answer: %s\n", answerHint(q))
	}
	fmt.Fprintf(&b, "continue with: aml resume %s --journal %s", runID, r.f.journal)
	for _, q := range se.Questions {
		fmt.Fprintf(&b, " --answer %s", shellWord(q.ID+"="+answerExample(q)))
	}
	fmt.Fprintln(r.stderr, b.String())
}

// answerHint describes what an answer to q must be.
func answerHint(q eval.Question) string {
	if q.Schema == nil {
		return "text"
	}
	doc, _ := json.Marshal(q.Schema)
	return "JSON matching " + string(doc)
}

// answerExample is a placeholder answer for the resume hint.
func answerExample(q eval.Question) string {
	if q.Schema == nil {
		return "TEXT"
	}
	switch q.Schema["type"] {
	case "boolean":
		return "true"
	case "string":
		return "TEXT"
	case "integer", "number":
		return "0"
	}
	return "JSON"
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\$`#&;|<>()*?[]{}~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseAnswer reads the text of --answer ID=VALUE for question q: free
// text and string schemas take VALUE as it is, every other schema parses
// it as JSON. The answer must then match the schema.
func parseAnswer(q eval.Question, raw string) (any, error) {
	var v any = raw
	if t, _ := q.Schema["type"].(string); q.Schema != nil && t != "string" {
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			doc, _ := json.Marshal(q.Schema)
			return nil, fmt.Errorf("the answer to question %q is not JSON (%v); its schema is %s", q.ID, err, doc)
		}
	}
	if err := eval.CheckAnswer(q, v); err != nil {
		return nil, err
	}
	return v, nil
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

const runsUsage = `usage: aml runs --journal DIR                   list the journaled runs
       aml runs show RUN --journal DIR [--json] print a run's state, result and recorded effects (as a tree)
       aml runs prune --journal DIR             remove the runs that finished (succeeded or failed)
       aml runs --temporal HOST:PORT            list the runs on Temporal (aml run --temporal)
       aml runs show RUN --temporal HOST:PORT   print a run's state, effects and result on Temporal

A run that cannot be read is listed as unreadable, with the reason on stderr; one whose
journal.log is not a regular file (a named pipe, a device, a symbolic link) is never
read, shown or removed.

Exit codes: 0 success, 1 failure (no journal at DIR, a run that cannot be shown, a run
prune could not remove or kept because its journal.log is not a regular file),
2 usage error.

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

func cmdRuns(args []string, stdout, stderr io.Writer) int {
	var (
		dir    string
		asJSON bool
	)
	var t temporalFlags
	fs := newFlagSet("runs", runsUsage, stderr)
	fs.StringVar(&dir, "journal", "", "the journal directory (required without --temporal)")
	fs.BoolVar(&asJSON, "json", false, "aml runs show: print the run (state, error, questions, result, effects) as one JSON object")
	t.register(fs, "list or show the runs on the Temporal service at HOST:PORT instead of a journal's")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if t.address != "" {
		switch {
		case len(pos) == 0:
			return listTemporalRuns(&t, stdout, stderr)
		case pos[0] == "show" && len(pos) == 2:
			return showTemporalRun(&t, pos[1], stdout, stderr)
		}
		fmt.Fprintf(stderr, "aml runs --temporal: unknown arguments %q\n", strings.Join(pos, " "))
		fs.Usage()
		return exitUsage
	}
	if dir == "" {
		fmt.Fprintln(stderr, "aml runs: --journal DIR is required")
		fs.Usage()
		return exitUsage
	}
	switch {
	case len(pos) == 0:
		return listRuns(dir, stdout, stderr)
	case pos[0] == "show" && len(pos) == 2:
		return showRun(dir, pos[1], asJSON, stdout, stderr)
	case pos[0] == "prune" && len(pos) == 1:
		// A run it keeps for a reason (a journal.log that is not a
		// regular file) is reported after what it removed.
		removed, err := journal.Prune(dir)
		for _, id := range removed {
			fmt.Fprintf(stdout, "removed %s\n", id)
		}
		if err != nil {
			fmt.Fprintf(stderr, "aml runs prune: %v\n", err)
		}
		fmt.Fprintf(stderr, "aml runs prune: removed %d finished run(s)\n", len(removed))
		if err != nil {
			return exitFailure
		}
		return exitOK
	}
	fmt.Fprintf(stderr, "aml runs: unknown arguments %q\n", strings.Join(pos, " "))
	fs.Usage()
	return exitUsage
}

func listRuns(dir string, stdout, stderr io.Writer) int {
	runs, err := journal.List(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "aml runs: no journal at %s\n", dir)
			return exitFailure
		}
		fmt.Fprintf(stderr, "aml runs: %v\n", err)
		return exitFailure
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATE\tWORKFLOW\tSTARTED\tEFFECTS\tLAST EFFECT")
	var unread []error
	for _, s := range runs {
		last := "-"
		if e := s.LastEffect; e != nil {
			last = e.Label
			if e.Pos.IsValid() {
				last += " at " + e.Pos.String()
			}
			if !s.LastAt.IsZero() {
				last += " (" + s.LastAt.Local().Format("15:04:05") + ")"
			}
		}
		state := string(s.State)
		if len(s.Questions) > 0 {
			state += fmt.Sprintf(" (%d question(s))", len(s.Questions))
		}
		workflow, started := s.Workflow, "-"
		if s.ReadErr != nil {
			// Why is printed below the table.
			unread = append(unread, s.ReadErr)
			if state == "" {
				state = "unreadable"
			}
		}
		if workflow == "" {
			workflow = "-"
		}
		if !s.Started.IsZero() {
			started = s.Started.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, state, workflow, started, s.Effects, last)
	}
	tw.Flush()
	for _, err := range unread {
		fmt.Fprintf(stderr, "aml runs: %v\n", err)
	}
	return exitOK
}

// shownRun is the --json form of aml runs show.
type shownRun struct {
	ID        string          `json:"id"`
	State     journal.State   `json:"state"`
	Workflow  string          `json:"workflow"`
	Started   time.Time       `json:"started"`
	Error     string          `json:"error,omitempty"`
	Questions []eval.Question `json:"questions,omitempty"`
	Result    *string         `json:"result,omitempty"`
	Effects   []shownEffect   `json:"effects"`
	// Usage is what the recorded sessions spent, in all.
	Usage map[string]int64 `json:"usage"`
	// CostUSD is the cost the recorded sessions reported or were priced
	// at.
	CostUSD float64 `json:"cost_usd"`
}

// shownEffect is one identity's last record in aml runs show --json.
type shownEffect struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Label  string `json:"label"`
	Source string `json:"source,omitempty"`
	Bytes  int    `json:"resultBytes,omitempty"`
	// Withdrawn says why a resume withdrew the record: "changed" (the
	// context ran live from an earlier change) or "removed" (the program
	// no longer reaches it).
	Withdrawn string `json:"withdrawn,omitempty"`
	// Usage is what an agent session recorded it spent.
	Usage *eval.Usage `json:"usage,omitempty"`
}

// showRun prints a run's state, its result (when it succeeded) and its
// effects as the tree of their identities: each component call, fan-out
// and branch is a level.
func showRun(dir, id string, asJSON bool, stdout, stderr io.Writer) int {
	runs, err := journal.List(dir)
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: %v\n", err)
		return exitFailure
	}
	var sum *journal.Summary
	for i := range runs {
		if runs[i].ID == id {
			sum = &runs[i]
		}
	}
	if sum == nil {
		fmt.Fprintf(stderr, "aml runs show: no run %s in %s\n", id, dir)
		return exitFailure
	}
	effects, err := journal.ReadEffects(dir, id)
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: %v\n", err)
		return exitFailure
	}
	last := lastRecords(effects)
	if asJSON {
		out := shownRun{ID: sum.ID, State: sum.State, Workflow: sum.Workflow, Started: sum.Started, Error: sum.Error, Questions: sum.Questions, Effects: []shownEffect{}}
		if sum.State == journal.Succeeded {
			out.Result = &sum.Result
		}
		var total eval.Usage
		for _, e := range last {
			se := shownEffect{ID: e.ID, Kind: e.Kind, Label: e.Label, Bytes: len(e.Result), Withdrawn: withdrawnWhy(e)}
			if se.Withdrawn != "" {
				se.Kind, se.Bytes = "", 0
			} else if u, ok := eval.RecordedUsage(e); ok {
				se.Usage = &u
				total = total.Add(u)
			}
			if e.Pos.IsValid() {
				se.Source = e.Pos.String()
			}
			out.Effects = append(out.Effects, se)
		}
		out.Usage, out.CostUSD = usageJSON(total), total.CostUSD
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "aml runs show: %v\n", err)
			return exitFailure
		}
		fmt.Fprintln(stdout, string(b))
		return exitOK
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	fmt.Fprintf(w, "run %s  %s  %s\n", sum.ID, sum.State, sum.Workflow)
	if sum.Error != "" {
		fmt.Fprintf(w, "error: %s\n", errorLines(sum.Error))
	}
	for _, q := range sum.Questions {
		fmt.Fprintf(w, "waiting: %s (asked at %s): %s\n", q.ID, q.Source, q.Text)
	}
	if sum.State == journal.Succeeded {
		fmt.Fprintf(w, "result: %s\n", indentResult(sum.Result))
	}
	var total eval.Usage
	for _, e := range last {
		if u, ok := eval.RecordedUsage(e); ok && withdrawnWhy(e) == "" {
			total = total.Add(u)
		}
	}
	if !total.IsZero() {
		fmt.Fprintf(w, "spent: %s in %d model call(s)\n", total, total.ModelCalls)
	}
	printEffectTree(w, last)
	return exitOK
}

// indentResult prints a result on the line of "result:", its later
// lines indented beneath.
func indentResult(s string) string {
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", "\n        ")
}

// lastRecords returns the last record of every identity, in the order
// the identities were first recorded.
func lastRecords(effects []*eval.Effect) []*eval.Effect {
	at := map[string]int{}
	var out []*eval.Effect
	for _, e := range effects {
		if i, ok := at[e.ID]; ok {
			out[i] = e
			continue
		}
		at[e.ID] = len(out)
		out = append(out, e)
	}
	return out
}

// withdrawnWhy is why a resume withdrew e's identity ("changed" or
// "removed"), or "" when e is an effect.
func withdrawnWhy(e *eval.Effect) string {
	if e.Kind != eval.VoidKind {
		return ""
	}
	var v struct {
		Void string `json:"void"`
	}
	if json.Unmarshal(e.Result, &v) != nil || v.Void == "" {
		return "changed"
	}
	return v.Void
}

// errorLines returns a recorded error's first lines (a resume's changes
// are one per line), later lines indented beneath "error:", and how
// many more there are.
func errorLines(s string) string {
	const most = 20
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	more := len(lines) - most
	if more > 0 {
		lines = append(lines[:most], fmt.Sprintf("… %d more line(s): aml runs show --json prints them all", more))
	}
	return strings.Join(lines, "\n       ")
}

// effectNode is one level of the effect tree.
type effectNode struct {
	seg      string
	effect   *eval.Effect
	children map[string]*effectNode
	order    []string
}

func (n *effectNode) child(seg string) *effectNode {
	if c, ok := n.children[seg]; ok {
		return c
	}
	if n.children == nil {
		n.children = map[string]*effectNode{}
	}
	c := &effectNode{seg: seg}
	n.children[seg] = c
	n.order = append(n.order, seg)
	return c
}

// printEffectTree prints records (the last of each identity), nested by
// the segments of their identities, siblings in the order their
// contexts reached them (fan-out branches by index).
func printEffectTree(w io.Writer, records []*eval.Effect) {
	root := &effectNode{}
	ords := map[*effectNode]int32{}
	for _, e := range records {
		n := root
		segs := strings.Split(e.ID, "/")
		ord := orderOf(e.Order)
		for k, seg := range segs {
			n = n.child(seg)
			if k < len(ord) {
				if _, ok := ords[n]; !ok {
					ords[n] = ord[k]
				}
			}
		}
		n.effect = e
	}
	var walk func(n *effectNode, depth int)
	walk = func(n *effectNode, depth int) {
		order := append([]string(nil), n.order...)
		sort.SliceStable(order, func(i, j int) bool {
			a, b := n.children[order[i]], n.children[order[j]]
			oa, okA := ords[a]
			ob, okB := ords[b]
			if okA && okB {
				return oa < ob
			}
			return false
		})
		for _, seg := range order {
			c := n.children[seg]
			indent := strings.Repeat("  ", depth)
			switch {
			case c.effect != nil:
				e := c.effect
				note := resultSize(e)
				if why := withdrawnWhy(e); why != "" {
					note = "  (withdrawn: " + why + ")"
				} else if n, waited, ok := eval.RecordedRetries(e); ok {
					note = fmt.Sprintf("  (rate limited: run again %d time(s) after %s)", n, waited)
				} else if u, ok := eval.RecordedUsage(e); ok {
					note += ", " + u.String()
				}
				fmt.Fprintf(w, "%s%s  %s%s\n", indent, e.Label, e.Pos, note)
			case isIndex(seg):
				fmt.Fprintf(w, "%sbranch %s\n", indent, seg)
			default:
				fmt.Fprintf(w, "%s%s\n", indent, segLabel(seg))
			}
			walk(c, depth+1)
		}
	}
	walk(root, 0)
}

// orderOf parses an Effect.Order.
func orderOf(s string) []int32 {
	var out []int32
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil
		}
		out = append(out, int32(n))
	}
	return out
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// segLabel names a path segment: c#n is a component call, p#n a
// fan-out (both counted from 0 in their context).
func segLabel(seg string) string {
	kind, n, ok := strings.Cut(seg, "#")
	if !ok {
		return seg
	}
	switch kind {
	case "c":
		return "component call " + n
	case "p":
		return "fan-out " + n
	}
	return seg
}

func resultSize(e *eval.Effect) string {
	if len(e.Result) == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d B)", len(e.Result))
}

// askMu keeps terminal questions from interleaving; askIn reads the
// answers from askFrom (os.Stdin).
var (
	askMu   sync.Mutex
	askFrom *os.File
	askIn   *bufio.Reader
)

// terminalAsk answers ask() on the terminal in runs without a journal,
// or fails saying how to answer when stdin is not a terminal.
func terminalAsk(stderr io.Writer) func(ctx context.Context, q eval.Question) (any, error) {
	return func(ctx context.Context, q eval.Question) (any, error) {
		if !term.IsTerminal(int(os.Stdin.Fd())) {
			return nil, errors.New("stdin is not a terminal; run with --journal DIR so that the run suspends at the question, then answer it with aml resume RUN --journal DIR --answer ID=VALUE")
		}
		askMu.Lock()
		defer askMu.Unlock()
		// One reader for all questions, so that lines typed ahead are
		// not lost between them.
		if askFrom != os.Stdin {
			askFrom, askIn = os.Stdin, bufio.NewReader(os.Stdin)
		}
		in := askIn
		for {
			fmt.Fprintf(stderr, "? %s", q.Text)
			if q.Schema != nil {
				fmt.Fprintf(stderr, " [%s]", answerHint(q))
			}
			fmt.Fprint(stderr, " ")
			line, err := in.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("reading the answer: %w", err)
			}
			line = strings.TrimRight(line, "\r\n")
			if t, _ := q.Schema["type"].(string); t == "boolean" {
				switch strings.ToLower(strings.TrimSpace(line)) {
				case "y", "yes":
					line = "true"
				case "n", "no":
					line = "false"
				}
			}
			v, err := parseAnswer(q, line)
			if err == nil {
				return v, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fmt.Fprintf(stderr, "  %v\n", err)
		}
	}
}
