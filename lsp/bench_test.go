package lsp

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/internal/testbin"
)

// genWorkspace writes a workflow of about lines lines that loads modules
// generated modules, and returns the directory and the main file's text.
func genWorkspace(tb testing.TB, modules, lines int) (string, string) {
	tb.Helper()
	files := map[string]string{}
	var main strings.Builder
	for m := range modules {
		var mod strings.Builder
		fmt.Fprintf(&mod, "\"\"\"Module %d.\"\"\"\n\nTOPIC_%d = \"topic %d\"\n\n", m, m, m)
		for f := range 5 {
			fmt.Fprintf(&mod, "def lane_%d_%d(prompt, model = \"m\"):\n    \"\"\"Lane %d of module %d.\"\"\"\n    return agent(prompt, sandbox(access = \"read-only\"), model = model, name = \"lane-%d-%d\")\n\n", m, f, f, m, m, f)
		}
		files[fmt.Sprintf("lib/mod%02d.star", m)] = mod.String()
		fmt.Fprintf(&main, "load(\"lib/mod%02d.star\", \"lane_%d_0\", \"TOPIC_%d\")\n", m, m, m)
	}
	main.WriteString("\n")
	n := 0
	for lineCount(main.String()) < lines-6 {
		m := n % modules
		fmt.Fprintf(&main, "def step_%d(x):\n    \"\"\"Step %d.\"\"\"\n    box = sandbox(access = \"read-write\", root = \".\")\n    return lane_%d_0(TOPIC_%d + x, model = \"m%d\"), box\n\n", n, n, m, m, n)
		n++
	}
	main.WriteString("def main():\n    return parallel([step_0(\"a\"), step_1(\"b\")])\n")
	files["main.star"] = main.String()
	return writeFiles(tb, files), main.String()
}

func lineCount(s string) int { return strings.Count(s, "\n") }

// positions returns the protocol positions of every occurrence of word
// in text.
func positions(text, word string) []protocol.Position {
	var out []protocol.Position
	for i, line := range strings.Split(text, "\n") {
		for j := 0; ; {
			k := strings.Index(line[j:], word)
			if k < 0 {
				break
			}
			out = append(out, protocol.Position{Line: uint32(i), Character: uint32(j + k)})
			j += k + len(word)
		}
	}
	return out
}

// reportPercentiles reports the median and 95th percentile of ds.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*95/100].Microseconds())/1000, "p95-ms")
}

func benchSession(b *testing.B) (*client, protocol.DocumentURI, string) {
	dir, text := genWorkspace(b, 20, 2000)
	c := startClient(b, Options{})
	c.initialize(dir, false)
	u := c.open(filepath.Join(dir, "main.star"), text)
	c.diagnostics(u, 1)
	return c, u, text
}

// BenchmarkHover: hover over the calls of a 2,000-line workflow that
// loads 20 modules (each op is one request through the protocol).
func BenchmarkHover(b *testing.B) {
	c, u, text := benchSession(b)
	var targets []protocol.Position
	for _, w := range []string{"sandbox", "access", "lane_", "TOPIC_", "box"} {
		targets = append(targets, positions(text, w)...)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := targets[i%len(targets)]
		start := time.Now()
		var h *protocol.Hover
		c.mustCall(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: p}}, &h)
		ds = append(ds, time.Since(start))
		if h == nil {
			b.Fatalf("no hover at %v", p)
		}
	}
	b.StopTimer()
	reportPercentiles(b, ds)
}

// BenchmarkCompletion: completion inside calls (keywords and names) of
// the same workflow.
func BenchmarkCompletion(b *testing.B) {
	c, u, text := benchSession(b)
	targets := positions(text, "root = ")
	for i := range targets {
		targets[i].Character += uint32(len("root = "))
	}
	targets = append(targets, positions(text, "sandbox(")...)
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := targets[i%len(targets)]
		if i%2 == 1 {
			p = targets[len(targets)-1-i%(len(targets)/2)]
			p.Character += uint32(len("sandbox("))
		}
		start := time.Now()
		var list protocol.CompletionList
		c.mustCall(protocol.MethodTextDocumentCompletion, &protocol.CompletionParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: p}}, &list)
		ds = append(ds, time.Since(start))
		if len(list.Items) == 0 {
			b.Fatalf("no completion at %v", p)
		}
	}
	b.StopTimer()
	reportPercentiles(b, ds)
}

// BenchmarkDiagnosticsAfterEdit: from an incremental edit to the
// diagnostics of its version, for the same workflow.
func BenchmarkDiagnosticsAfterEdit(b *testing.B) {
	c, u, text := benchSession(b)
	at := positions(text, "\"a\"")[0]
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		version := int32(i + 2)
		start := time.Now()
		c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
			"textDocument": map[string]any{"uri": u, "version": version},
			"contentChanges": []map[string]any{{
				"range": protocol.Range{Start: protocol.Position{Line: at.Line, Character: at.Character + 1}, End: protocol.Position{Line: at.Line, Character: at.Character + 2}},
				"text":  string(rune('a' + i%26)),
			}},
		})
		c.diagnostics(u, version)
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, ds)
}

// BenchmarkBurstThenHover: 500 incremental edits of the 2,000-line
// workflow sent back to back, then a hover. Over net.Pipe a send returns
// when the server has read it, so the time from the first edit to the
// hover's answer (burst-ms) is what a client waits; after-last-ms is the
// part after the last edit was sent.
func BenchmarkBurstThenHover(b *testing.B) {
	c, u, text := benchSession(b)
	at := positions(text, "\"a\"")[0]
	hoverAt := positions(text, "sandbox")[0]
	version := int32(1)
	var burst, after []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var last time.Time
		first := time.Now()
		for j := range 500 {
			version++
			last = time.Now()
			c.notify(protocol.MethodTextDocumentDidChange, map[string]any{
				"textDocument": map[string]any{"uri": u, "version": version},
				"contentChanges": []map[string]any{{
					"range": protocol.Range{Start: protocol.Position{Line: at.Line, Character: at.Character + 1}, End: protocol.Position{Line: at.Line, Character: at.Character + 2}},
					"text":  string(rune('a' + j%26)),
				}},
			})
		}
		var h *protocol.Hover
		c.mustCall(protocol.MethodTextDocumentHover, &protocol.HoverParams{TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}, Position: hoverAt}}, &h)
		burst, after = append(burst, time.Since(first)), append(after, time.Since(last))
		if h == nil {
			b.Fatal("no hover after the burst")
		}
		b.StopTimer()
		c.diagnostics(u, version) // let the burst's checks settle
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(burst)
	slices.Sort(after)
	b.ReportMetric(float64(burst[len(burst)*95/100].Microseconds())/1000, "burst-p95-ms")
	b.ReportMetric(float64(after[len(after)*95/100].Microseconds())/1000, "after-last-p95-ms")
}

// BenchmarkIndex200: the initial workspace index of 200 files.
func BenchmarkIndex200(b *testing.B) {
	files := map[string]string{}
	for i := range 200 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "load(\"f%03d.star\", \"step_0\")\n\n", (i+1)%200)
		for f := range 10 {
			fmt.Fprintf(&sb, "def step_%d(x):\n    return agent(\"do \" + x, sandbox(access = \"read-only\"), name = \"s%d\")\n\n", f, f)
		}
		files[fmt.Sprintf("f%03d.star", i)] = sb.String()
	}
	dir := writeFiles(b, files)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := newServer(Options{})
		s.ctx = context.Background()
		s.roots = []string{dir}
		s.indexRoots()
		if len(s.index) != 200 {
			b.Fatalf("indexed %d files", len(s.index))
		}
	}
}

// BenchmarkMemory50Files reports the live heap of a session with 50
// open 2,000-line files (with their diagnostics) and the index.
func BenchmarkMemory50Files(b *testing.B) {
	dir, text := genWorkspace(b, 20, 2000)
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		c := startClient(b, Options{})
		c.initialize(dir, false)
		var uris []protocol.DocumentURI
		for n := range 50 {
			p := filepath.Join(dir, fmt.Sprintf("open%02d.star", n))
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
			uris = append(uris, c.open(p, text))
		}
		for _, u := range uris {
			c.diagnostics(u, 1)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-MB")
		b.ReportMetric(float64(after.Sys)/(1<<20), "sys-MB")
		c.shutdown()
	}
}

// BenchmarkResidentMemory50Files reports the resident memory (VmRSS) of
// a real aml lsp process with 50 open 2,000-line files, after their
// diagnostics (Linux only).
func BenchmarkResidentMemory50Files(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc (Linux) to read the resident memory")
	}
	bin := testbin.Build(b, "github.com/aml-go/aml/cmd/aml", testbin.Options{})
	dir, text := genWorkspace(b, 20, 2000)
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "lsp")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := &client{t: b, done: make(chan error, 1), diags: map[protocol.DocumentURI]*protocol.PublishDiagnosticsParams{}, wake: make(chan struct{})}
		c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(pipe{stdout, stdin}))
		c.conn.Go(context.Background(), c.handleServer)
		c.initialize(dir, false)
		var uris []protocol.DocumentURI
		files, _ := strconv.Atoi(os.Getenv("AML_BENCH_FILES"))
		if os.Getenv("AML_BENCH_FILES") == "" {
			files = 50
		}
		for n := range files {
			uris = append(uris, c.open(filepath.Join(dir, fmt.Sprintf("open%02d.star", n)), text))
		}
		for _, u := range uris {
			c.diagnostics(u, 1)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")))
				b.ReportMetric(float64(n)/1024, "rss-MB")
			}
		}
		c.mustCall(protocol.MethodShutdown, nil, nil)
		c.notify(protocol.MethodExit, nil)
		if err := cmd.Wait(); err != nil {
			b.Errorf("aml lsp: %v", err)
		}
		_ = c.conn.Close()
	}
}

// pipe joins a process's stdout and stdin into one stream.
type pipe struct {
	io.ReadCloser
	io.WriteCloser
}

func (p pipe) Close() error {
	_ = p.WriteCloser.Close()
	return p.ReadCloser.Close()
}
