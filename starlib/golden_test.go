package starlib_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/starlib"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// goldenDir holds the golden cases, relative to the starlib package.
const goldenDir = "../testdata/eval"

// TestGolden runs every testdata/eval/*.star with entry main and compares
// a readable record of the run with NAME.golden:
//
//	-- result --        the result, one "|"-prefixed line per text line
//	-- print --         print() output, one line per call (if any)
//	-- agents --        every agent() session the provider ran
//	-- error --         the error (load or evaluation), if the run failed
//
// Each agent record is a header "FILE:LINE:COL provider=P [model=M]
// [name=N]" followed by its prompt, system, follow-ups and its result or
// error. Agent records are listed in a canonical order (source position,
// then prompt, then the rest of the record), not in completion order,
// because parallel() branches and evaluate_all() values finish in any
// order.
//
// Files are loaded by absolute path so that cases can run in parallel;
// the case directory is then stripped from every text, so positions read
// NAME.star:LINE:COL (and lib/x.star:LINE:COL for loaded modules).
//
// A case sets its provider and limits with configure() in the .star
// itself; no default provider is given. Leading comment lines of the form
// "# env: KEY=VALUE" set the values env() sees; nothing else from the
// process environment is visible.
// stagingDir matches an agent's private staging directory.
var stagingDir = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/aml-agent-[0-9]+`)

func TestGolden(t *testing.T) {
	dir, err := filepath.Abs(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.star"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no golden cases in %s", dir)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".star")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := runGolden(t, dir, file)
			goldenPath := filepath.Join(dir, name+".golden")
			if *update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("missing golden file (run go test ./starlib -run TestGolden -update): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s.golden does not match (run with -update to accept):\n%s", name, diff.Diff(name+".golden", want, "got", got))
			}
		})
	}
}

// runGolden loads and evaluates one case and renders its record.
func runGolden(t *testing.T, dir, file string) []byte {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vars, err := envDirectives(src)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(file), err)
	}
	var (
		printMu sync.Mutex
		prints  []string
	)
	lo := starlib.LoadOptions{
		Env: func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		},
		Print: func(msg string) {
			printMu.Lock()
			prints = append(prints, msg)
			printMu.Unlock()
		},
	}
	sink := &captureSink{spans: map[string]*agentRecord{}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var result string
	w, err := starlib.LoadFile(file, lo)
	if err == nil {
		result, err = w.Evaluate(ctx, "main", eval.Options{
			// Application files (include(src=), skill()) resolve from the
			// case directory.
			Cwd:   dir,
			Trace: []eval.TraceSink{sink},
			OnTraceError: func(err error, _ eval.Event) {
				t.Errorf("trace sink: %v", err)
			},
		})
	}

	strip := func(s string) string {
		// Agent staging areas are fresh temporary directories.
		s = stagingDir.ReplaceAllString(s, "$$STAGING")
		s = strings.ReplaceAll(s, dir+string(filepath.Separator), "")
		return strings.ReplaceAll(s, dir, ".")
	}
	var b strings.Builder
	if err == nil {
		b.WriteString("-- result --\n")
		writeLines(&b, "|", strip(result))
	}
	printMu.Lock()
	if len(prints) > 0 {
		b.WriteString("-- print --\n")
		for _, p := range prints {
			writeLines(&b, "", strip(p))
		}
	}
	printMu.Unlock()
	if recs := sink.records(); len(recs) > 0 {
		b.WriteString("-- agents --\n")
		for _, r := range recs {
			b.WriteString(strip(r.text))
		}
	}
	if err != nil {
		b.WriteString("-- error --\n")
		writeLines(&b, "", strip(err.Error()))
	}
	return []byte(b.String())
}

// envDirectives reads the "# env: KEY=VALUE" lines of the leading comment
// block of a case.
func envDirectives(src []byte) (map[string]string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "#") {
			break
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(line, "#")), "env:")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(rest, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("malformed directive %q: want # env: KEY=VALUE", line)
		}
		vars[k] = strings.TrimSpace(v)
	}
	return vars, sc.Err()
}

// writeLines writes every line of s (split at "\n") with prefix.
func writeLines(b *strings.Builder, prefix, s string) {
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(prefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// captureSink records agent spans with their content.
type captureSink struct {
	mu    sync.Mutex
	spans map[string]*agentRecord
	order []*agentRecord
}

type agentRecord struct {
	source string
	prompt string
	head   strings.Builder
	ended  bool
	text   string
}

// CaptureContent opts in to prompts, system text and results.
func (s *captureSink) CaptureContent() bool { return true }

// HandleTrace records the start and end of every Agent span.
func (s *captureSink) HandleTrace(ev eval.Event) error {
	if ev.Kind != "agent" || ev.Name != "Agent" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case eval.SpanStart:
		a := ev.Attributes
		r := &agentRecord{source: attrString(a, "aml.source"), prompt: attrString(a, "prompt")}
		fmt.Fprintf(&r.head, "%s provider=%s", r.source, attrString(a, "provider"))
		if m, ok := a["model"]; ok {
			fmt.Fprintf(&r.head, " model=%v", m)
		}
		if n, ok := a["agent.name"]; ok {
			fmt.Fprintf(&r.head, " name=%v", n)
		}
		r.head.WriteByte('\n')
		writeField(&r.head, "prompt", r.prompt)
		if sys, ok := a["system"]; ok {
			writeField(&r.head, "system", fmt.Sprint(sys))
		}
		if fu, ok := a["followUps"]; ok {
			list, ok := fu.([]string)
			if !ok {
				return fmt.Errorf("followUps attribute is %T, want []string", fu)
			}
			for i, f := range list {
				writeField(&r.head, "follow_up["+strconv.Itoa(i+1)+"]", f)
			}
		}
		if _, dup := s.spans[ev.SpanID]; dup {
			return fmt.Errorf("agent span %s started twice", ev.SpanID)
		}
		s.spans[ev.SpanID] = r
		s.order = append(s.order, r)
	case eval.SpanEnd:
		r, ok := s.spans[ev.SpanID]
		if !ok {
			return fmt.Errorf("agent span %s ended without a start", ev.SpanID)
		}
		if r.ended {
			return fmt.Errorf("agent span %s ended twice", ev.SpanID)
		}
		r.ended = true
		if ev.Status == eval.StatusOK {
			writeField(&r.head, "result", attrString(ev.Attributes, "result"))
		} else {
			writeField(&r.head, "error", attrString(ev.Attributes, "error.message"))
		}
	}
	return nil
}

// records returns the agent records in canonical order: by source
// position (file, line, column), then prompt, then the whole record.
func (s *captureSink) records() []*agentRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := append([]*agentRecord(nil), s.order...)
	for _, r := range recs {
		r.text = r.head.String()
		if !r.ended {
			r.text += "  (span never ended)\n"
		}
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if c := compareSource(recs[i].source, recs[j].source); c != 0 {
			return c < 0
		}
		if recs[i].prompt != recs[j].prompt {
			return recs[i].prompt < recs[j].prompt
		}
		return recs[i].text < recs[j].text
	})
	return recs
}

// compareSource orders "file:line:col" positions numerically.
func compareSource(a, b string) int {
	fa, la, ca := splitSource(a)
	fb, lb, cb := splitSource(b)
	switch {
	case fa != fb:
		return strings.Compare(fa, fb)
	case la != lb:
		return la - lb
	}
	return ca - cb
}

func splitSource(s string) (file string, line, col int) {
	file = s
	if i := strings.LastIndexByte(file, ':'); i >= 0 {
		col, _ = strconv.Atoi(file[i+1:])
		file = file[:i]
	}
	if i := strings.LastIndexByte(file, ':'); i >= 0 {
		line, _ = strconv.Atoi(file[i+1:])
		file = file[:i]
	}
	return file, line, col
}

func attrString(a map[string]any, key string) string {
	if v, ok := a[key]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

// writeField writes "  name: value" for a plain one-line value, and
// otherwise "  name:" followed by one "    |"-prefixed line per text line,
// so that blank lines and surrounding whitespace stay visible.
func writeField(b *strings.Builder, name, value string) {
	if value != "" && !strings.Contains(value, "\n") && strings.TrimSpace(value) == value && !strings.HasPrefix(value, "|") {
		fmt.Fprintf(b, "  %s: %s\n", name, value)
		return
	}
	fmt.Fprintf(b, "  %s:\n", name)
	for _, line := range strings.Split(value, "\n") {
		b.WriteString("    |")
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// TestGoldenEnvDirectives checks the "# env:" directive parser.
func TestGoldenEnvDirectives(t *testing.T) {
	vars, err := envDirectives([]byte("# rule\n# env: A=1\n#env: B = x=y\n\n# env: C=\nx = 1\n# env: D=late\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "x=y", "C": ""}
	if fmt.Sprint(vars) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", vars, want)
	}
	if _, err := envDirectives([]byte("# env: novalue\n")); err == nil {
		t.Error("malformed directive accepted")
	}
	if _, err := envDirectives([]byte("# env: =v\n")); err == nil {
		t.Error("directive without a key accepted")
	}
}
