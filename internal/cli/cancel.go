package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aml-go/aml/temporal/wire"
)

const cancelUsage = `usage: aml cancel RUN --temporal HOST:PORT [--namespace NS] [--grace D]

Cancels a run on Temporal: its workflow code stops at its next pause,
its agent sessions and scripts are cancelled on every worker (their
processes end), its scopes are released, and the run ends as cancelled.
A run that has not ended --grace after the request (no worker serves
it, or its workflow code does not pause) is terminated: its sessions and
scripts end at their next heartbeat, and the workers release what it
held within a minute. aml cancel says which it did.

Exit codes: 0 cancelled or terminated, 1 the run could not be cancelled
(not found, or it had ended already), 2 usage error.

Flags:
`

// cancelGrace is how long aml cancel waits for a cancelled run to end
// before it terminates it.
const cancelGrace = 30 * time.Second

func cmdCancel(args []string, stdout, stderr io.Writer) int {
	var t temporalFlags
	var grace time.Duration
	fs := newFlagSet("cancel", cancelUsage, stderr)
	t.register(fs, "the Temporal frontend address (default: TEMPORAL_ADDRESS)")
	fs.DurationVar(&grace, "grace", cancelGrace, "how long the run may take to end before it is terminated")
	fs.DurationVar(&grace, "wait", cancelGrace, "the former name of --grace")
	pos, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "aml cancel: want exactly one run id")
		fs.Usage()
		return exitUsage
	}
	if grace < 0 {
		fmt.Fprintln(stderr, "aml cancel: --grace must not be negative")
		return exitUsage
	}
	if !t.addressFromEnv("cancel", stderr) {
		return exitUsage
	}
	c, err := t.dial()
	if err != nil {
		fmt.Fprintf(stderr, "aml cancel: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Minute)
	defer cancel()
	res, err := c.Cancel(ctx, pos[0], grace)
	switch {
	case errors.Is(err, wire.ErrAlreadyEnded):
		fmt.Fprintf(stderr, "aml cancel: run %s had ended before it could be cancelled\n", pos[0])
		return exitFailure
	case err != nil:
		fmt.Fprintf(stderr, "aml cancel: %v\n", err)
		return exitFailure
	case res.Terminated:
		fmt.Fprintf(stdout, "terminated %s: it did not end within %s of the cancel request (its sessions and scripts end at their next heartbeat; its workers release what it held)\n", pos[0], grace)
	default:
		fmt.Fprintf(stdout, "cancelled %s\n", pos[0])
	}
	return exitOK
}
