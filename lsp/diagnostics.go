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

// diagnoseAll schedules the check of the document at path (when it is
// open) and of every open document that loads it, directly or through
// other files. It returns at once: the checks run on one goroutine per
// document, which coalesces the changes that arrive while it works and
// publishes only for the document's latest version.
func (s *server) diagnoseAll(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changed[path] = true
	s.scheduleLocked(path)
}

// scheduleLocked marks path to be checked again and starts its checker
// when none runs.
func (s *server) scheduleLocked(path string) {
	s.dirty[path] = true
	if s.checking[path] || s.ctx.Err() != nil {
		return
	}
	s.checking[path] = true
	s.wg.Add(1)
	go s.checkLoop(path)
}

// checkLoop checks path until nothing new is asked of it. A change of
// path first schedules its dependents; then the document, if open, is
// checked over a snapshot of its latest version.
func (s *server) checkLoop(path string) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if s.ctx.Err() != nil || !s.dirty[path] {
			delete(s.checking, path)
			delete(s.dirty, path)
			delete(s.changed, path)
			s.mu.Unlock()
			return
		}
		changed := s.changed[path]
		delete(s.dirty, path)
		delete(s.changed, path)
		d := s.docs[path]
		snap := s.snapshotLocked()
		s.mu.Unlock()
		if changed {
			deps := dependents(snap, path)
			s.mu.Lock()
			for _, p := range deps {
				s.scheduleLocked(p)
			}
			s.mu.Unlock()
		}
		if d != nil {
			s.diagnose(d, snap)
		}
	}
}

// dependents returns the open documents that load path, directly or
// through other files (open or on disk below the roots).
func dependents(snap *snapshot, path string) []string {
	seen := map[string]bool{filepath.Clean(path): true}
	queue := []string{filepath.Clean(path)}
	var out []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range snap.Loaders(p) {
			if seen[q] {
				continue
			}
			seen[q] = true
			queue = append(queue, q)
			if _, open := snap.docs[q]; open {
				out = append(out, q)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lintLimit is the size above which a document's diagnostics leave out
// the lint warnings, two thirds of the time of checking a large file (aml
// check still reports them).
const lintLimit = 1 << 20

// analyses bounds the analyses that run at once (each builds a parse
// tree and reads the loaded modules): opening many files at once costs
// time, not memory.
var analyses = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// diagnose checks d over snap and publishes its diagnostics, unless a
// newer version of the document has arrived meanwhile (its checker runs
// again for it) or it was closed.
func (s *server) diagnose(d *document, snap *snapshot) {
	analyses <- struct{}{}
	if s.ctx.Err() != nil {
		<-analyses
		return
	}
	f := analysis.Analyze(d.path, d.text, &analysis.Options{Extensions: s.opts.Extensions, ReadFile: snap.readFile, NoLint: len(d.text) > lintLimit, Lint: s.opts.Lint, Parsed: snap.current(d)})
	<-analyses
	diags := toDiagnostics(d.lines, f.Diagnostics, snap.utf8)

	mu := s.publishLock(d.path)
	mu.Lock()
	defer mu.Unlock()
	s.mu.Lock()
	if s.docs[d.path] != d || s.dirty[d.path] {
		s.mu.Unlock()
		return
	}
	s.published[d.path] = true
	s.mu.Unlock()
	s.publish(d.uri, d.version, diags)
}

// publishLock serializes publishing the diagnostics of path, so a check
// cannot publish after the document's close cleared them.
func (s *server) publishLock(path string) *sync.Mutex {
	mu, _ := s.diagLocks.LoadOrStore(path, &sync.Mutex{})
	return mu.(*sync.Mutex)
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
