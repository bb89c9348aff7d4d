package golden

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/aml-go/aml/internal/durable"
	"github.com/aml-go/aml/starlib"
	"github.com/rogpeppe/go-internal/diff"
)

// ErrNoTests is returned by Run when no test was found (or none matched
// Options.Run).
var ErrNoTests = errors.New("no tests found")

// Options configure Run.
type Options struct {
	// Context cancels the run; nil means context.Background().
	Context context.Context
	// Paths are the directories (walked recursively) and files to test;
	// empty means ".".
	Paths []string
	// Update rewrites golden files instead of comparing with them.
	Update bool
	// Run, when non-empty, is a regular expression; only tests whose name
	// it matches run.
	Run string
	// Out receives one line per test, failure details (diffs, errors) and
	// the summary line; nil discards them.
	Out io.Writer
	// Parallel bounds the tests running at once; 0 means GOMAXPROCS.
	Parallel int
	// Timeout bounds each test; 0 means no limit.
	Timeout time.Duration
	// Extensions are loaded with every test file
	// (starlib.LoadOptions.Extensions): the provider factories beyond the
	// core ones that the workflows use.
	Extensions []*starlib.Extension
}

// Summary counts the tests of a Run.
type Summary struct {
	Passed int
	Failed int
	// Updated counts the golden files -update created or changed; they
	// are also counted as passed.
	Updated int
	// Errors counts the passed tests whose golden records an error: the
	// workflow is expected to fail. The summary line reports them, so
	// that a run that began to fail cannot hide in a passing golden.
	Errors int
	// NewErrors counts the golden files -update rewrote to record an error
	// where they recorded none (or did not exist).
	NewErrors int
}

// Test is one test file.
type Test struct {
	// Name is the file path relative to the path it was found under, with
	// slashes and without ".star"; -run matches it.
	Name string
	// Path is the file path as given (the path argument joined with the
	// name), with slashes and without ".star"; output lines show it.
	Path string
	// File is the .star file.
	File string
	// Golden is the golden file beside it.
	Golden string
	// Extensions are loaded with the file; Run sets them from Options.
	Extensions []*starlib.Extension
}

// Result is the outcome of one test.
type Result struct {
	Test Test
	// OK reports a passed test.
	OK bool
	// Updated reports that -update created or changed the golden file.
	Updated bool
	// RecordsError reports that the record (and so, for a passed test,
	// the golden file) contains the run's error.
	RecordsError bool
	// NewError reports that -update wrote an error into a golden file
	// that recorded none, or created one with an error.
	NewError bool
	// Duration is how long the test took.
	Duration time.Duration
	// Detail explains a failure: the unified diff between the golden file
	// and the record, or an error.
	Detail string
}

// Find returns the tests under paths ("." when empty), in path order and
// then lexical file order, each file once. A path that cannot be read, or
// that is neither a directory nor a .star file, is an error.
func Find(paths []string) ([]Test, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var tests []Test
	seen := map[string]bool{}
	add := func(root, file string) error {
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		if seen[abs] {
			return nil
		}
		seen[abs] = true
		rel := filepath.Base(file)
		if root != file {
			if rel, err = filepath.Rel(root, file); err != nil {
				return err
			}
		}
		stem := strings.TrimSuffix(file, ".star")
		tests = append(tests, Test{
			Name:   filepath.ToSlash(strings.TrimSuffix(rel, ".star")),
			Path:   filepath.ToSlash(stem),
			File:   file,
			Golden: stem + ".golden",
		})
		return nil
	}
	for _, root := range paths {
		if r, ok := strings.CutSuffix(root, "/..."); ok {
			// Go's package pattern: directories are walked recursively
			// anyway.
			root = r
			if root == "" {
				root = "/"
			}
		}
		info, err := os.Stat(root)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = fmt.Errorf("%s: %w", root, pe.Err)
			}
			return nil, err
		}
		if !info.IsDir() {
			if !strings.HasSuffix(root, ".star") {
				return nil, fmt.Errorf("%s: not a directory or a .star file", root)
			}
			if err := add(root, root); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			name := d.Name()
			if !strings.HasSuffix(name, ".star") {
				return nil
			}
			// Only regular files (and links to them): a FIFO named
			// *_test.star would be waited on.
			if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
				return nil
			}
			if !strings.HasSuffix(name, "_test.star") {
				if _, err := os.Stat(strings.TrimSuffix(path, ".star") + ".golden"); err != nil {
					return nil
				}
			}
			return add(root, path)
		})
		if err != nil {
			return nil, err
		}
	}
	return tests, nil
}

// errTimeout is the cause of a test's context when Options.Timeout passed.
var errTimeout = errors.New("test timed out")

// Check runs one test: it records the run and compares the record with the
// golden file, or with update writes the record to the golden file. A run
// cut short by ctx or timeout (0 for none) fails and never writes the
// golden file.
func Check(ctx context.Context, t Test, update bool, timeout time.Duration) Result {
	start := time.Now()
	res := Result{Test: t}
	defer func() { res.Duration = time.Since(start) }()
	tctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimeout)
		defer cancel()
	}
	got, err := Record(tctx, t.File, t.Extensions...)
	res.Duration = time.Since(start)
	switch {
	case err != nil:
		res.Detail = err.Error()
		return res
	case errors.Is(context.Cause(tctx), errTimeout):
		res.Detail = fmt.Sprintf("test timed out after %s", timeout)
		return res
	case ctx.Err() != nil:
		res.Detail = fmt.Sprintf("test interrupted: %v", context.Cause(ctx))
		return res
	}
	want, rerr := os.ReadFile(t.Golden)
	res.RecordsError = recordsError(got)
	if update {
		if rerr == nil && bytes.Equal(got, want) {
			res.OK = true
			return res
		}
		// Whole or not at all: a run killed while it updates leaves the
		// old golden, not half of the new one.
		if err := durable.WriteFile(t.Golden, got, 0o644); err != nil {
			res.Detail = err.Error()
			return res
		}
		res.OK, res.Updated = true, true
		res.NewError = res.RecordsError && (rerr != nil || !recordsError(want))
		return res
	}
	if rerr != nil {
		if errors.Is(rerr, fs.ErrNotExist) {
			res.Detail = fmt.Sprintf("missing golden file %s (run with -update to create it)", filepath.ToSlash(t.Golden))
		} else {
			res.Detail = rerr.Error()
		}
		return res
	}
	if !bytes.Equal(got, want) && !crlfOnly(got, want) {
		res.Detail = string(diff.Diff(filepath.ToSlash(t.Golden), want, "got", got))
		if bytes.Contains(want, []byte("\r\n")) {
			res.Detail += "(the golden has CRLF line endings, which the diff does not show; run with -update to rewrite it)\n"
		}
		return res
	}
	res.OK = true
	return res
}

// crlfOnly reports whether want is got with its line endings turned
// into CRLF, as a checkout with git's core.autocrlf leaves a golden: got
// holds no carriage return, so none of its records can differ by one.
func crlfOnly(got, want []byte) bool {
	return bytes.Contains(want, []byte("\r\n")) && !bytes.Contains(got, []byte("\r")) &&
		bytes.Equal(got, bytes.ReplaceAll(want, []byte("\r\n"), []byte("\n")))
}

// Run finds the tests of opts.Paths, runs those opts.Run selects (up to
// opts.Parallel at once) and writes to opts.Out, in test order, one line
// per test:
//
//	ok   PATH (12ms)
//	FAIL PATH
//
// a passed test whose golden records an error is marked
// "[expects an error]" (after -update changed it to record one where it
// recorded none: "[updated, now records an error: the run fails]"); a
// failed test's detail (a unified diff or an error) follows its line; and
// finally the summary line "N passed, N failed", where "N passed" says how
// many of them expect an error: "5 passed (2 expecting an error), 0
// failed". The error reports an
// invalid -run expression or an unreadable path, and wraps ErrNoTests when
// nothing was selected; test failures are counted in the Summary, not
// returned.
func Run(opts Options) (Summary, error) {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	var re *regexp.Regexp
	if opts.Run != "" {
		var err error
		if re, err = regexp.Compile(opts.Run); err != nil {
			return Summary{}, fmt.Errorf("invalid -run expression: %w", err)
		}
	}
	all, err := Find(opts.Paths)
	if err != nil {
		return Summary{}, err
	}
	tests := all[:0:0]
	for _, t := range all {
		if re == nil || re.MatchString(t.Name) {
			t.Extensions = opts.Extensions
			tests = append(tests, t)
		}
	}
	if len(tests) == 0 {
		paths := opts.Paths
		if len(paths) == 0 {
			paths = []string{"."}
		}
		where := strings.Join(paths, " ")
		if len(all) > 0 {
			return Summary{}, fmt.Errorf("%w: none of the %d tests under %s matches -run %q", ErrNoTests, len(all), where, opts.Run)
		}
		return Summary{}, fmt.Errorf("%w under %s (tests are *_test.star files and .star files with a sibling .golden file)", ErrNoTests, where)
	}

	workers := opts.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]chan Result, len(tests))
	for i := range results {
		results[i] = make(chan Result, 1)
	}
	sem := make(chan struct{}, workers)
	go func() {
		for i, t := range tests {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				results[i] <- Check(ctx, t, opts.Update, opts.Timeout)
			}()
		}
	}()
	var sum Summary
	for _, ch := range results {
		r := <-ch
		if r.OK {
			sum.Passed++
			var notes []string
			if r.Updated {
				sum.Updated++
				notes = append(notes, "updated")
			}
			if r.RecordsError {
				sum.Errors++
				switch {
				case r.NewError:
					sum.NewErrors++
					notes = append(notes, "now records an error: the run fails")
				default:
					notes = append(notes, "expects an error")
				}
			}
			note := ""
			if len(notes) > 0 {
				note = " [" + strings.Join(notes, ", ") + "]"
			}
			fmt.Fprintf(out, "ok   %s (%dms)%s\n", r.Test.Path, r.Duration.Milliseconds(), note)
			continue
		}
		sum.Failed++
		fmt.Fprintf(out, "FAIL %s\n", r.Test.Path)
		if d := r.Detail; d != "" {
			if !strings.HasSuffix(d, "\n") {
				d += "\n"
			}
			io.WriteString(out, d)
		}
	}
	fmt.Fprintln(out, sum.line())
	return sum, nil
}

// line is the summary line: "N passed, N failed", and how many of the
// passed goldens record an error.
func (s Summary) line() string {
	passed := fmt.Sprintf("%d passed", s.Passed)
	switch {
	case s.NewErrors > 0:
		passed += fmt.Sprintf(" (%d expecting an error, %d of them new: check that those runs should fail)", s.Errors, s.NewErrors)
	case s.Errors > 0:
		passed += fmt.Sprintf(" (%d expecting an error)", s.Errors)
	}
	return fmt.Sprintf("%s, %d failed", passed, s.Failed)
}

// recordsError reports whether a record has an error section. The
// record's structure decides, not a search for the section's header line,
// which print() output (written verbatim) may contain: a run that
// succeeded has a result section, and it comes first (right after the
// header line); a run that failed has none, and its error section comes
// last. A record without a header line is read from its first line.
func recordsError(record []byte) bool {
	rest, ok := bytes.CutPrefix(record, []byte(Header))
	if !ok && bytes.HasPrefix(record, []byte("#")) {
		// Another header (a hand-edited golden): the sections follow it.
		if _, after, found := bytes.Cut(record, []byte("\n")); found {
			rest = after
		} else {
			rest = nil
		}
	} else if !ok {
		rest = record
	}
	if bytes.HasPrefix(rest, []byte(resultSection)) {
		return false
	}
	return bytes.HasPrefix(rest, []byte(errorSection)) || bytes.Contains(rest, []byte("\n"+errorSection))
}
