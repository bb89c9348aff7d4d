package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/temporal/wire"
)

const answerUsage = `usage: aml answer RUN ID=VALUE... --temporal HOST:PORT [--namespace NS]

Answers questions a run on Temporal waits for (ask()): each VALUE is
checked against the question's schema (free text and string schemas take
VALUE as it is, others parse it as JSON), as aml resume --answer does,
and the run goes on with it. aml runs show RUN --temporal lists the
questions it waits for.

Exit codes: 0 answered, 1 the run could not be reached, 2 a usage error,
an id the run does not wait for, or an answer its schema refuses.

Flags:
`

func cmdAnswer(args []string, stdout, stderr io.Writer) int {
	var t temporalFlags
	fs := newFlagSet("answer", answerUsage, stderr)
	t.register(fs, "the Temporal frontend address (default: TEMPORAL_ADDRESS)")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		fmt.Fprintln(stderr, "aml answer: want a run id and at least one ID=VALUE")
		fs.Usage()
		return exitUsage
	}
	if !t.addressFromEnv("answer", stderr) {
		return exitUsage
	}
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml answer: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runID := pos[0]
	st, err := c.State(ctx, runID)
	if err != nil {
		fmt.Fprintf(stderr, "aml answer: run %s: %v\n", runID, err)
		return exitFailure
	}
	byID := map[string]eval.Question{}
	var ids []string
	for _, q := range st.Questions {
		byID[q.ID] = q
		ids = append(ids, q.ID)
	}
	answers := make([]wire.Answer, 0, len(pos)-1)
	given := map[string]bool{}
	for _, a := range pos[1:] {
		id, raw, ok := strings.Cut(a, "=")
		if !ok || id == "" {
			fmt.Fprintf(stderr, "aml answer: %q: want ID=VALUE\n", a)
			return exitUsage
		}
		if given[id] {
			fmt.Fprintf(stderr, "aml answer: question %q is answered twice\n", id)
			return exitUsage
		}
		given[id] = true
		q, ok := byID[id]
		if !ok {
			if len(ids) == 0 {
				fmt.Fprintf(stderr, "aml answer: run %s waits for no question\n", runID)
			} else {
				fmt.Fprintf(stderr, "aml answer: run %s waits for no question %q; it waits for: %s\n", runID, id, strings.Join(ids, ", "))
			}
			return exitUsage
		}
		v, err := parseAnswer(q, raw)
		if err != nil {
			fmt.Fprintf(stderr, "aml answer: %v\n", err)
			return exitUsage
		}
		answers = append(answers, wire.Answer{ID: id, Value: v})
	}
	if err := c.Answer(ctx, runID, answers...); err != nil {
		fmt.Fprintf(stderr, "aml answer: run %s: %v\n", runID, err)
		return exitFailure
	}
	for _, a := range answers {
		fmt.Fprintf(stdout, "answered %s\n", a.ID)
	}
	return exitOK
}
