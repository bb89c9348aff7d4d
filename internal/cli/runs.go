package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/journal"
)

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

// listTemporalRuns is aml runs --temporal: the runs of the namespace,
// newest first.
func listTemporalRuns(t *temporalFlags, stdout, stderr io.Writer) int {
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml runs: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runs, err := c.Runs(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "aml runs: %v\n", err)
		return exitFailure
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATE\tWORKFLOW\tSTARTED\tCLOSED")
	for _, r := range runs {
		closed, wf := "-", r.Workflow
		if !r.Closed.IsZero() {
			closed = r.Closed.Local().Format("2006-01-02 15:04:05")
		}
		if wf == "" {
			wf = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, wf, r.Started.Local().Format("2006-01-02 15:04:05"), closed)
	}
	tw.Flush()
	return exitOK
}

// showTemporalRun is aml runs show RUN --temporal: the run's state, its
// effects as history records them, and its result or error.
func showTemporalRun(t *temporalFlags, runID string, stdout, stderr io.Writer) int {
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := c.Show(ctx, runID)
	if err != nil {
		fmt.Fprintf(stderr, "aml runs show: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "run:      %s\nstate:    %s\n", runID, d.State)
	if d.Workflow != "" {
		fmt.Fprintf(stdout, "workflow: %s\n", d.Workflow)
	}
	fmt.Fprintf(stdout, "started:  %s\n", d.Started.Local().Format(time.RFC3339))
	if d.Executions > 1 {
		fmt.Fprintf(stdout, "executions: %d (the run continued as new %d time(s), each resuming the journal of the ones before)\n", d.Executions, d.Executions-1)
	}
	if len(d.Questions) > 0 {
		fmt.Fprintf(stdout, "questions (answer with aml answer %s ID=VALUE --temporal %s):\n", runID, t.address)
		for _, q := range d.Questions {
			line := fmt.Sprintf("  %s: %s", q.ID, q.Text)
			if q.Schema != nil {
				doc, _ := json.Marshal(q.Schema)
				line += " " + string(doc)
			}
			fmt.Fprintf(stdout, "%s (asked at %s)\n", line, q.Source)
		}
	}
	fmt.Fprintf(stdout, "effects:  %d\n", len(d.Effects))
	for _, e := range d.Effects {
		line := "  " + e.Label + ": " + e.State
		if e.Worker != "" {
			line += " (" + e.Worker
			if e.Attempt > 1 {
				line += fmt.Sprintf(", attempt %d", e.Attempt)
			}
			line += ")"
		}
		fmt.Fprintln(stdout, line)
	}
	if d.Failure != "" {
		fmt.Fprintf(stdout, "error:\n  %s\n", strings.ReplaceAll(d.Failure, "\n", "\n  "))
	}
	if d.Completed {
		fmt.Fprintf(stdout, "result:\n%s", d.Result)
		if !strings.HasSuffix(d.Result, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	return exitOK
}
