package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/report"
)

const reportUsage = `usage: aml report TRACE.jsonl [-o run.html] [--title TITLE]

Writes the run report of a trace file written earlier (aml run
--trace-file TRACE.jsonl): one self-contained HTML page with the executed
tree, a timeline of every span (queue waits, turns, cleanup), the error
and source position of every failed node, and totals (agents, turns,
tokens and usage where the provider reports them, durations). Content
(prompts, results) appears only when the trace captured it
(--capture-content). The page needs no network.

Without -o the report is written beside the trace, with the extension
.html. aml run --report run.html writes the same report at the end of a
run.

Flags:
`

// cmdReport is "aml report".
func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", reportUsage, stderr)
	out := fs.String("o", "", "write the report to this file (default: the trace's path with .html)")
	title := fs.String("title", "", "the report's title (default: the trace file's name)")
	rest, code, ok := parseArgs(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 1 {
		fs.Usage()
		return exitUsage
	}
	trace := rest[0]
	f, err := os.Open(trace)
	if err != nil {
		fmt.Fprintf(stderr, "aml report: %v\n", err)
		return exitUsage
	}
	events, err := report.ReadTrace(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "aml report: %s: %v\n", trace, err)
		return exitUsage
	}
	if len(events) == 0 {
		fmt.Fprintf(stderr, "aml report: %s holds no trace events: write one with aml run --trace-file %s FILE\n", trace, trace)
		return exitUsage
	}
	if *out == "" {
		*out = strings.TrimSuffix(trace, filepath.Ext(trace)) + ".html"
	}
	if *title == "" {
		*title = filepath.Base(trace)
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, events, report.Options{Title: *title}); err != nil {
		fmt.Fprintf(stderr, "aml report: %v\n", err)
		return exitFailure
	}
	if err := durable.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "aml report: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return exitOK
}

// writeReport writes the run report that c gathered to path, for aml
// run --report.
func writeReport(c *report.Collector, path string) error {
	var buf bytes.Buffer
	if err := c.WriteHTML(&buf); err != nil {
		return fmt.Errorf("cannot write the run report: %w", err)
	}
	return durable.WriteFile(path, buf.Bytes(), 0o644)
}
