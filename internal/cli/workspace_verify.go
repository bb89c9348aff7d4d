package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

const workspaceVerifyUsage = `usage: aml workspace verify s3://BUCKET[/PREFIX] [flags]

Runs the S3 workspace's protocol contract against a real bucket, below
PREFIX/.aml-verify-<uuid>/ (PREFIX defaults to aml/workspaces), and
removes what it wrote: GetObject with a streaming body and a stable ETag,
PutObject with If-None-Match: * (also raced by 10 writers) and with
If-Match, DeleteObject and ListObjectsV2 with continuation tokens (all
required), and conditional GET and DELETE (not required). It prints which
operations the service honours and whether s3_workspace() can trust it.
Credentials come from the standard AWS chain.

Exit status: 0 when the service can be trusted, 1 when a required
operation is not honoured or the checks could not run, 2 for usage errors.

Flags:
`

func cmdWorkspaceVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("workspace verify", workspaceVerifyUsage, stderr)
	var sf storeFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 1 || !strings.HasPrefix(rest[0], "s3://") {
		fmt.Fprintf(stderr, "aml workspace verify: want one s3://BUCKET[/PREFIX] argument, got %q\n", rest)
		fs.Usage()
		return exitUsage
	}
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(rest[0], "s3://"), "/")
	if !linked.Linked() {
		fmt.Fprintf(stderr, "aml workspace verify: %v\n", errNotLinked("aml workspace verify"))
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := linked.VerifyS3(ctx, sf.s3Options(bucket, prefix))
	if err != nil {
		fmt.Fprintf(stderr, "aml workspace verify: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "OPERATION\tNEEDED\tRESULT\tDETAIL\n")
		for _, c := range rep.Checks {
			need := "optional"
			if c.Required {
				need = "required"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Operation, need, c.Result, c.Detail)
		}
		_ = tw.Flush()
		if rep.Trusted {
			fmt.Fprintf(stdout, "s3://%s/%s: s3_workspace() can trust this service\n", rep.Bucket, rep.Prefix)
		} else {
			fmt.Fprintf(stdout, "s3://%s/%s: s3_workspace() cannot trust this service: a required operation is not honoured\n", rep.Bucket, rep.Prefix)
		}
	}
	if !rep.Trusted {
		return exitFailure
	}
	return exitOK
}
