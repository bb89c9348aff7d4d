package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
