package lsp

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

// diagnoseAll re-checks the document at path and the open documents that
// load it, each on its own goroutine; a run whose document has changed
// since it was scheduled does nothing.
func (s *server) diagnoseAll(path string) {
	snap := s.snapshot()
	targets := []*document{}
	if d := snap.docs[path]; d != nil {
		targets = append(targets, d)
	}
	for p, d := range snap.docs {
		if p != path && slices.Contains(d.loads, filepath.Clean(path)) {
			targets = append(targets, d)
		}
	}
	for _, d := range targets {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.diagnose(d)
		}()
	}
}

// lintLimit is the size above which a document's diagnostics leave out
// the lint warnings, two thirds of the time of checking a large file (aml
// check still reports them).
const lintLimit = 1 << 20

// analyses bounds the analyses that run at once (each builds a parse
// tree and reads the loaded modules): opening many files at once costs
// time, not memory.
var analyses = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

func (s *server) diagnose(d *document) {
	analyses <- struct{}{}
	defer func() { <-analyses }()
	mu, _ := s.diagLocks.LoadOrStore(d.path, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	cur := s.docs[d.path]
	stale := cur != d && (cur == nil || cur.version != d.version || string(cur.text) != string(d.text))
	snap := s.snapshotLocked()
	s.mu.Unlock()
	if stale {
		return // a newer version is scheduled
	}
	f := analysis.Analyze(d.path, d.text, &analysis.Options{Extensions: s.opts.Extensions, ReadFile: snap.readFile, NoLint: len(d.text) > lintLimit})
	diags := toDiagnostics(d.lines, f.Diagnostics, snap.utf8)

	s.mu.Lock()
	cur = s.docs[d.path]
	if cur == nil || string(cur.text) != string(d.text) {
		s.mu.Unlock()
		return
	}
	s.published[d.path] = true
	s.mu.Unlock()
	s.publish(d.uri, d.version, diags)
}

func toDiagnostics(lines *analysis.Lines, ds []analysis.Diagnostic, utf8Units bool) []protocol.Diagnostic {
	out := make([]protocol.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := protocol.DiagnosticSeverityError
		if d.Severity == analysis.Warning {
			sev = protocol.DiagnosticSeverityWarning
		}
		out = append(out, protocol.Diagnostic{
			Range:    protoRange(lines, d.Start, d.End, utf8Units),
			Severity: sev,
			Code:     d.Code,
			Source:   "aml",
			Message:  d.Message,
		})
	}
	return out
}

func (s *server) publish(uri string, version int32, diags []protocol.Diagnostic) {
	if diags == nil {
		diags = []protocol.Diagnostic{}
	}
	err := s.conn.Notify(context.WithoutCancel(s.ctx), protocol.MethodTextDocumentPublishDiagnostics, &protocol.PublishDiagnosticsParams{
		URI: protocol.DocumentURI(uri), Version: uint32(max(version, 0)), Diagnostics: diags,
	})
	if err != nil && s.ctx.Err() == nil {
		s.logf("publishing diagnostics of %s: %v", uri, err)
	}
}
