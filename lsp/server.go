// Package lsp is the language server behind `aml lsp`: the Language
// Server Protocol over a stream (stdio for editors, net.Pipe in tests),
// answering from starlib/analysis.
//
// The package is the protocol layer only. Each feature lives in its own
// file (hover.go, completion.go, signature.go, definition.go,
// references.go, highlight.go, symbols.go, folding.go, selection.go,
// tokens.go, hints.go, rename.go, format.go, diagnostics.go, actions.go),
// as a thin handler over an immutable snapshot of the open documents and
// the workspace index; the analysis it calls knows nothing of the
// protocol and is what `aml check` runs too. dispatch.go lists the
// handlers by method and the capabilities the server declares. Nothing
// here evaluates a workflow, constructs a provider or starts a process.
//
// Documents are synchronized incrementally. Positions are converted
// between the protocol's (0-based lines, UTF-16 code units, or UTF-8
// bytes when the client offers "utf-8" in general.positionEncodings) and
// Starlark's (1-based lines, rune columns). While a document does not
// parse, its last good parse serves symbols, hover and definitions.
// Documents over 1 MiB get no lint warnings as they are typed (aml check
// still reports them).
//
// Messages are framed as the base protocol says (a Content-Length header,
// a blank line, the body). A body that is not JSON gets a parse error
// (-32700) with id null and one that is not a JSON-RPC message an
// invalid-request error (-32600), and the session goes on. A header the
// server cannot use, a Content-Length over MaxMessageSize (64 MiB), or a
// stream that ends inside a message cannot be recovered from: Serve
// returns a *FramingError that says what was wrong.
//
// Notifications are handled in order on the connection's read loop,
// which only applies edits to the text: parsing happens when a request
// or a check first needs a version, and each open document has one
// checker goroutine that coalesces the edits arriving while it works and
// publishes diagnostics only for the version that is current when it
// finishes (labelled with that version, never older than one published
// before). When a file changes (edited, saved, closed, or changed on
// disk as workspace/didChangeWatchedFiles reports; the server registers a
// watcher for **/*.star when the client allows dynamic registration),
// every open file that loads it, directly or not, is checked again.
// Each request runs on its own goroutine over the snapshot taken when it
// arrived, so a request sees every edit sent before it, and
// $/cancelRequest cancels a request that has not answered yet (it then
// fails with RequestCancelled).
package lsp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.starlark.net/syntax"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/analysis"
)

// Options configure a server.
type Options struct {
	// Extensions are the builtins beyond the core ones, as the aml
	// command links them.
	Extensions []*starlib.Extension
	// Version is reported as the server's version.
	Version string
	// Lint is the analysis's linter (analysis.Options.Lint): the
	// aml command passes buildlint.Findings where it links it.
	Lint func(path string, src []byte) []analysis.Finding
	// Log receives one line per internal failure (a handler that
	// panicked, a reply that could not be sent); nil discards them.
	Log io.Writer
}

// Serve runs a language server over rwc until the client sends exit, the
// stream closes or ctx is cancelled. It returns nil after an orderly
// shutdown and exit, and an error otherwise. Every goroutine it starts
// has ended when it returns.
func Serve(ctx context.Context, rwc io.ReadWriteCloser, opts Options) error {
	s := newServer(opts)
	s.exit = make(chan struct{})
	conn := jsonrpc2.NewConn(newStream(rwc))
	s.conn = conn
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = ctx
	conn.Go(ctx, s.handle)
	select {
	case <-conn.Done():
	case <-s.exit:
		// The read loop may stay blocked on a stream whose Close cannot
		// interrupt it (a process's stdin): the session is over anyway.
		_ = conn.Close()
	case <-ctx.Done():
		_ = conn.Close()
	}
	cancel()
	s.wg.Wait()
	s.mu.Lock()
	exited, shutdown := s.exited, s.state == stateShutdown
	s.mu.Unlock()
	var ferr *FramingError
	switch {
	case exited && shutdown:
		return nil
	case exited:
		return errors.New("the client sent exit without shutdown")
	case errors.As(conn.Err(), &ferr):
		return fmt.Errorf("lsp: reading a message: %w", ferr)
	case parent.Err() != nil && !errors.Is(conn.Err(), io.EOF):
		return parent.Err()
	}
	if err := conn.Err(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("lsp: the connection failed: %w", err)
	}
	return errors.New("lsp: the client closed the connection without shutdown and exit")
}

type state int

const (
	stateNew state = iota
	stateRunning
	stateShutdown
)

// server is one client's session. mu guards every field below it;
// snapshots taken under it are immutable.
type server struct {
	opts  Options
	conn  jsonrpc2.Conn
	ctx   context.Context
	query analysis.Query
	wg    sync.WaitGroup
	// diagLocks serializes publishing the diagnostics of one document
	// (by path).
	diagLocks sync.Map
	// exit is closed when the client sends exit.
	exit     chan struct{}
	exitOnce sync.Once

	mu     sync.Mutex
	state  state
	exited bool
	utf8   bool
	watch  bool // the client registers file watchers on request
	// lineFolds: the client folds whole lines only
	// (textDocument.foldingRange.lineFoldingOnly).
	lineFolds bool
	roots     []string
	docs      map[string]*document
	index     map[string]*indexed // files on disk below the roots
	cancels   map[string]context.CancelFunc
	// published remembers which documents have diagnostics shown, so
	// closing one clears them.
	published map[string]bool
	trees     *trees
	// dirty are the documents to check again, changed the files whose
	// dependents are to be checked again too, checking those with a
	// checker running (see checkLoop).
	dirty, changed, checking map[string]bool
}

func newServer(opts Options) *server {
	return &server{
		opts:      opts,
		query:     analysis.Query{Extensions: opts.Extensions},
		docs:      map[string]*document{},
		index:     map[string]*indexed{},
		cancels:   map[string]context.CancelFunc{},
		published: map[string]bool{},
		trees:     newTrees(),
		dirty:     map[string]bool{},
		changed:   map[string]bool{},
		checking:  map[string]bool{},
	}
}

func (s *server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "aml lsp: "+format+"\n", args...)
	}
}

// request is a decoded request with the snapshot it runs over.
type request struct {
	snap *snapshot
	id   string
}

// errNotInitialized and friends are the protocol's error replies.
var (
	errNotInitialized = jsonrpc2.NewError(-32002, "the server is not initialized: send initialize first")
	errShutdown       = jsonrpc2.NewError(jsonrpc2.InvalidRequest, "the server is shutting down: only exit is accepted")
)

func invalidParams(format string, args ...any) error {
	return jsonrpc2.NewError(jsonrpc2.InvalidParams, fmt.Sprintf(format, args...))
}

// handle is called by the connection's read loop for every message.
func (s *server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	defer func() {
		if r := recover(); r != nil {
			s.logf("%s panicked: %v\n%s", req.Method(), r, debug.Stack())
			_ = reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InternalError, fmt.Sprintf("%s failed: %v", req.Method(), r)))
		}
	}()
	call, isCall := req.(*jsonrpc2.Call)
	method := req.Method()

	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	switch {
	case method == protocol.MethodExit:
		s.mu.Lock()
		s.exited = true
		s.mu.Unlock()
		s.exitOnce.Do(func() { close(s.exit) })
		return nil
	case method == protocol.MethodInitialize:
		if st != stateNew {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "initialize was sent twice"))
		}
		res, err := s.initialize(req.Params())
		return reply(ctx, res, err)
	case st == stateNew:
		if isCall {
			return reply(ctx, nil, errNotInitialized)
		}
		return nil // notifications before initialize are dropped
	case st == stateShutdown:
		if isCall {
			return reply(ctx, nil, errShutdown)
		}
		return nil
	case method == protocol.MethodShutdown:
		s.mu.Lock()
		s.state = stateShutdown
		s.mu.Unlock()
		return reply(ctx, nil, nil)
	case method == "$/cancelRequest":
		s.cancel(req.Params())
		return nil
	}
	if !isCall {
		err := s.notify(method, req.Params())
		if err != nil {
			s.logf("%s: %v", method, err)
		}
		return nil
	}
	h, ok := requests[method]
	if !ok {
		return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, fmt.Sprintf("method %q is not supported", method)))
	}
	id := idKey(call.ID())
	rctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.cancels[id] = cancel
	snap := s.snapshotLocked()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.cancels, id)
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.run(rctx, h, &request{snap: snap, id: id}, req.Params(), method)
		if rctx.Err() != nil && err == nil {
			res, err = nil, protocol.ErrRequestCancelled
		}
		if rerr := reply(context.WithoutCancel(rctx), res, err); rerr != nil {
			s.logf("replying to %s: %v", method, rerr)
		}
	}()
	return nil
}

// run calls a request handler, turning a panic into an error reply.
func (s *server) run(ctx context.Context, h handler, r *request, params json.RawMessage, method string) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.logf("%s panicked: %v\n%s", method, p, debug.Stack())
			res, err = nil, jsonrpc2.NewError(jsonrpc2.InternalError, fmt.Sprintf("%s failed: %v", method, p))
		}
	}()
	if testHookRequest != nil {
		testHookRequest(ctx, method, r.id)
	}
	if ctx.Err() != nil {
		return nil, protocol.ErrRequestCancelled
	}
	return h(ctx, s, r, params)
}

// testHookRequest, when set by a test, runs before each request handler.
var testHookRequest func(ctx context.Context, method, id string)

// handler answers a request, given its params as they came.
type handler func(ctx context.Context, s *server, r *request, params json.RawMessage) (any, error)

func idKey(id jsonrpc2.ID) string {
	b, _ := json.Marshal(&id)
	return string(b)
}

func (s *server) cancel(params json.RawMessage) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	key := string(p.ID)
	var n int64
	if json.Unmarshal(p.ID, &n) == nil {
		key = fmt.Sprint(n)
	}
	s.mu.Lock()
	c := s.cancels[key]
	s.mu.Unlock()
	if c != nil {
		c()
	}
}

func decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return invalidParams("missing params")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams("malformed params: %v", err)
	}
	return nil
}

// initialize answers the client's capabilities with the server's.
func (s *server) initialize(params json.RawMessage) (any, error) {
	var p protocol.InitializeParams
	var extra struct {
		Capabilities struct {
			General struct {
				PositionEncodings []string `json:"positionEncodings"`
			} `json:"general"`
			TextDocument struct {
				FoldingRange struct {
					LineFoldingOnly bool `json:"lineFoldingOnly"`
				} `json:"foldingRange"`
			} `json:"textDocument"`
			Workspace struct {
				DidChangeWatchedFiles struct {
					DynamicRegistration bool `json:"dynamicRegistration"`
				} `json:"didChangeWatchedFiles"`
			} `json:"workspace"`
		} `json:"capabilities"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	_ = json.Unmarshal(params, &extra)
	var roots []string
	for _, f := range p.WorkspaceFolders {
		if path, ok := uriPath(f.URI); ok {
			roots = append(roots, path)
		}
	}
	// Clients older than workspace folders send only the root, the oldest
	// only its path.
	//lint:ignore SA1019 how clients older than workspace folders name the root
	rootURI, rootPath := p.RootURI, p.RootPath
	if len(roots) == 0 && rootURI != "" {
		if path, ok := uriPath(string(rootURI)); ok {
			roots = append(roots, path)
		}
	}
	if len(roots) == 0 && rootPath != "" {
		roots = append(roots, rootPath)
	}
	encoding := "utf-16"
	for _, e := range extra.Capabilities.General.PositionEncodings {
		if e == "utf-8" {
			encoding = "utf-8"
		}
	}
	s.mu.Lock()
	s.state = stateRunning
	s.utf8 = encoding == "utf-8"
	s.roots = roots
	s.watch = extra.Capabilities.Workspace.DidChangeWatchedFiles.DynamicRegistration
	s.lineFolds = extra.Capabilities.TextDocument.FoldingRange.LineFoldingOnly
	s.mu.Unlock()

	raw, err := json.Marshal(serverCapabilities)
	if err != nil {
		return nil, err
	}
	var capMap map[string]any
	if err := json.Unmarshal(raw, &capMap); err != nil {
		return nil, err
	}
	for name, v := range capabilities {
		capMap[name] = v
	}
	capMap["positionEncoding"] = encoding
	return map[string]any{
		"capabilities": capMap,
		"serverInfo":   map[string]string{"name": "aml", "version": s.opts.Version},
	}, nil
}

// notify handles a notification, in order, on the read loop.
func (s *server) notify(method string, params json.RawMessage) error {
	switch method {
	case protocol.MethodInitialized:
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.indexRoots()
		}()
		s.mu.Lock()
		watch := s.watch
		s.mu.Unlock()
		if watch {
			// The reply comes through the read loop: wait off it.
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.registerWatcher()
			}()
		}
	case protocol.MethodTextDocumentDidOpen:
		var p protocol.DidOpenTextDocumentParams
		if err := decode(params, &p); err != nil {
			return err
		}
		path := docPath(string(p.TextDocument.URI))
		s.open(path, string(p.TextDocument.URI), p.TextDocument.Version, []byte(p.TextDocument.Text))
	case protocol.MethodTextDocumentDidChange:
		var p didChangeParams
		if err := decode(params, &p); err != nil {
			return err
		}
		return s.change(docPath(p.TextDocument.URI), p.TextDocument.Version, p.ContentChanges)
	case protocol.MethodTextDocumentDidClose:
		var p protocol.DidCloseTextDocumentParams
		if err := decode(params, &p); err != nil {
			return err
		}
		s.close(docPath(string(p.TextDocument.URI)))
	case protocol.MethodTextDocumentDidSave:
		var p protocol.DidSaveTextDocumentParams
		if err := decode(params, &p); err != nil {
			return err
		}
		path := docPath(string(p.TextDocument.URI))
		s.reindex(path)
		s.diagnoseAll(path)
	case protocol.MethodWorkspaceDidChangeWatchedFiles:
		var p protocol.DidChangeWatchedFilesParams
		if err := decode(params, &p); err != nil {
			return err
		}
		for _, ev := range p.Changes {
			path := docPath(string(ev.URI))
			s.reindex(path)
			s.diagnoseAll(path)
		}
	}
	return nil
}

// starWatcher is the id of the server's registration of a watcher for
// the .star files of the workspace.
const starWatcher = "aml-star-files"

// registerWatcher asks the client to report changes of .star files on
// disk (workspace/didChangeWatchedFiles), so the open files that load
// them are checked again.
func (s *server) registerWatcher() {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	params := map[string]any{"registrations": []map[string]any{{
		"id":              starWatcher,
		"method":          protocol.MethodWorkspaceDidChangeWatchedFiles,
		"registerOptions": map[string]any{"watchers": []map[string]any{{"globPattern": "**/*.star"}}},
	}}}
	if _, err := s.conn.Call(ctx, protocol.MethodClientRegisterCapability, params, nil); err != nil && s.ctx.Err() == nil {
		s.logf("registering a watcher for .star files: %v", err)
	}
}

// didChangeParams is textDocument/didChange with a range that may be
// absent (a whole-document change), which protocol's struct cannot say.
type didChangeParams struct {
	TextDocument struct {
		URI     string `json:"uri"`
		Version int32  `json:"version"`
	} `json:"textDocument"`
	ContentChanges []contentChange `json:"contentChanges"`
}

type contentChange struct {
	Range *protocol.Range `json:"range"`
	Text  string          `json:"text"`
}

// docPath is the path a document URI names: the file path of a file:
// URI, else the URI itself (an untitled buffer).
func docPath(u string) string {
	if p, ok := uriPath(u); ok {
		return p
	}
	return u
}

func uriPath(u string) (string, bool) {
	if !strings.HasPrefix(u, "file:") {
		return "", false
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Path == "" {
		return "", false
	}
	return filepath.Clean(filepath.FromSlash(parsed.Path)), true
}

// fileURI is the file: URI of a path.
func fileURI(path string) protocol.DocumentURI {
	if strings.Contains(path, ":") && !filepath.IsAbs(path) {
		return protocol.DocumentURI(path) // an untitled buffer's URI
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return protocol.DocumentURI((&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String())
}

// maxIndexed bounds the files indexed below one workspace root.
const maxIndexed = 5000

// indexRoots parses every .star file below the workspace roots (for
// workspace symbols, references and renames across files that are not
// open).
func (s *server) indexRoots() {
	s.mu.Lock()
	roots := append([]string(nil), s.roots...)
	s.mu.Unlock()
	for _, root := range roots {
		paths, err := analysis.Files([]string{root})
		if err != nil {
			s.logf("indexing %s: %v", root, err)
			continue
		}
		if len(paths) > maxIndexed {
			s.logf("indexing %s: %d .star files, indexing the first %d (open a narrower folder for references across all of them)", root, len(paths), maxIndexed)
			paths = paths[:maxIndexed]
		}
		for _, p := range paths {
			if s.ctx.Err() != nil {
				return
			}
			s.reindex(p)
		}
	}
}

// reindex reads path from disk into the index, or drops it when it is
// gone.
func (s *server) reindex(path string) {
	src, err := starlib.ReadSource(path)
	if err != nil {
		s.mu.Lock()
		delete(s.index, path)
		s.mu.Unlock()
		return
	}
	f := analysis.ParseFile(path, src, s.opts.Extensions...)
	e := &indexed{loads: analysis.LoadedFiles(f), symbols: analysis.Symbols(f), lines: f.Lines()}
	s.mu.Lock()
	if _, open := s.docs[path]; !open {
		s.index[path] = e
	}
	s.mu.Unlock()
}

// indexed is what the index keeps of a file that is not open: what
// workspace symbols and the loaders of a file need. Trees are parsed
// again when a request needs one.
type indexed struct {
	loads   []string
	symbols []analysis.Symbol
	lines   *analysis.Lines
}

// document is an open document. Its fields are replaced, never
// modified, under the server's mutex; its parse is made when first
// needed (by a request or the diagnostics), off the read loop, so a burst
// of edits parses only the versions something asks about.
type document struct {
	path, uri string
	version   int32
	text      []byte
	lines     *analysis.Lines
	// fallback is the last good parse known when this version was made:
	// what serves while this text does not parse.
	fallback *goodParse
	trees    *trees
	exts     []*starlib.Extension
	once     sync.Once
	good     atomic.Pointer[goodParse]
}

// goodParse is a text that parsed (or the first text of a document,
// when none did); gen numbers it for the tree cache.
type goodParse struct {
	text  []byte
	lines *analysis.Lines
	gen   uint64
	// loads are the files the text loads.
	loads []string
}

// parsed returns the document's last good parse, parsing its text on
// the first call. It is safe to call from any goroutine.
func (d *document) parsed() *goodParse {
	d.once.Do(func() {
		f := analysis.ParseFile(d.path, d.text, d.exts...)
		if f.Syntax == nil && d.fallback != nil {
			d.good.Store(d.fallback)
			return
		}
		g := &goodParse{text: d.text, lines: d.lines, gen: generation.Add(1), loads: analysis.LoadedFiles(f)}
		d.trees.put(d.path, g.gen, f)
		d.good.Store(g)
	})
	return d.good.Load()
}

func (s *server) newDocument(old *document, path, uri string, version int32, text []byte) *document {
	d := &document{path: path, uri: uri, version: version, text: text, lines: analysis.NewLines(text), trees: s.trees, exts: s.opts.Extensions}
	if old != nil {
		if g := old.good.Load(); g != nil {
			d.fallback = g
		} else {
			d.fallback = old.fallback
		}
	}
	return d
}

func (s *server) open(path, uri string, version int32, text []byte) {
	s.mu.Lock()
	d := s.newDocument(nil, path, uri, version, text)
	s.docs[path] = d
	delete(s.index, path) // the document stands for the file
	s.mu.Unlock()
	s.diagnoseAll(path)
}

func (s *server) change(path string, version int32, changes []contentChange) error {
	s.mu.Lock()
	old := s.docs[path]
	if old == nil {
		s.mu.Unlock()
		return fmt.Errorf("didChange of %s, which is not open", path)
	}
	text := old.text
	lines := old.lines
	for i, ch := range changes {
		if ch.Range == nil {
			text = []byte(ch.Text)
		} else {
			start, err := offsetOf(lines, text, ch.Range.Start, s.utf8)
			if err != nil {
				s.mu.Unlock()
				return fmt.Errorf("change %d of %s: %w", i, path, err)
			}
			end, err := offsetOf(lines, text, ch.Range.End, s.utf8)
			if err != nil {
				s.mu.Unlock()
				return fmt.Errorf("change %d of %s: %w", i, path, err)
			}
			if end < start {
				start, end = end, start
			}
			next := make([]byte, 0, len(text)-(end-start)+len(ch.Text))
			next = append(next, text[:start]...)
			next = append(next, ch.Text...)
			next = append(next, text[end:]...)
			text = next
		}
		lines = analysis.NewLines(text)
	}
	s.docs[path] = s.newDocument(old, path, old.uri, version, text)
	s.mu.Unlock()
	s.diagnoseAll(path)
	return nil
}

func (s *server) close(path string) {
	s.mu.Lock()
	d := s.docs[path]
	delete(s.docs, path)
	wasShown := s.published[path]
	delete(s.published, path)
	s.mu.Unlock()
	s.trees.drop(path)
	if d != nil && wasShown {
		mu := s.publishLock(path)
		mu.Lock()
		s.publish(d.uri, d.version, nil)
		mu.Unlock()
	}
	s.reindex(path)
	s.diagnoseAll(path) // its loaders now read the file on disk
}

// snapshot is an immutable view of the open documents over the index: the
// analysis.Program the queries run against.
type snapshot struct {
	utf8  bool
	docs  map[string]*document
	index map[string]*indexed
	exts  []*starlib.Extension
	trees *trees

	mu   sync.Mutex
	disk map[string]*analysis.File // files read on demand
}

func (s *server) snapshotLocked() *snapshot {
	docs := make(map[string]*document, len(s.docs))
	for k, v := range s.docs {
		docs[k] = v
	}
	index := make(map[string]*indexed, len(s.index))
	for k, v := range s.index {
		index[k] = v
	}
	return &snapshot{utf8: s.utf8, docs: docs, index: index, exts: s.opts.Extensions, trees: s.trees, disk: map[string]*analysis.File{}}
}

func (s *server) snapshot() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

// File implements analysis.Program: an open document's current parse (or
// its last good one), or the file read from disk (once per snapshot).
func (sn *snapshot) File(path string) *analysis.File {
	path = filepath.Clean(path)
	if d, ok := sn.docs[path]; ok {
		return sn.good(d)
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if f, ok := sn.disk[path]; ok {
		return f
	}
	var f *analysis.File
	if src, err := starlib.ReadSource(path); err == nil {
		f = analysis.ParseFile(path, src, sn.exts...)
	}
	sn.disk[path] = f
	return f
}

// Loaders implements analysis.Program over the open and indexed files.
func (sn *snapshot) Loaders(path string) []string {
	path = filepath.Clean(path)
	var out []string
	seen := map[string]bool{}
	check := func(p string, loads []string) {
		if !seen[p] && slices.Contains(loads, path) {
			out = append(out, p)
		}
		seen[p] = true
	}
	for p, d := range sn.docs {
		check(p, d.parsed().loads)
	}
	for p, e := range sn.index {
		check(p, e.loads)
	}
	return out
}

// good returns the parse tree of a document's last text that parsed.
func (sn *snapshot) good(d *document) *analysis.File {
	g := d.parsed()
	return sn.trees.get(d.path, g.gen, g.text, sn.exts)
}

// current returns the parse tree of the document's own text, or nil when
// that text does not parse (the last good parse is of an older one, whose
// positions would be off). It parses the text when nothing has yet, so
// that the diagnostics and the requests share one tree per text.
func (sn *snapshot) current(d *document) *analysis.File {
	g := d.parsed()
	if !bytes.Equal(g.text, d.text) {
		return nil
	}
	return sn.trees.get(d.path, g.gen, g.text, sn.exts)
}

// at returns the open document of a URI, its last good parse and the
// Starlark position of a protocol position in it.
func (r *request) at(u protocol.DocumentURI, p protocol.Position) (*document, *analysis.File, syntax.Position, error) {
	d, err := r.snap.document(u)
	if err != nil {
		return nil, nil, syntax.Position{}, err
	}
	pos, _, err := starlarkPos(d, p, r.snap.utf8)
	if err != nil {
		return nil, nil, syntax.Position{}, err
	}
	return d, r.snap.good(d), pos, nil
}

// document returns the open document of a URI.
func (sn *snapshot) document(u protocol.DocumentURI) (*document, error) {
	d, ok := sn.docs[docPath(string(u))]
	if !ok {
		return nil, invalidParams("%s is not open: send textDocument/didOpen first", u)
	}
	return d, nil
}

// readFile reads a module for the diagnostics: open documents first.
func (sn *snapshot) readFile(path string) ([]byte, error) {
	if d, ok := sn.docs[filepath.Clean(path)]; ok {
		return d.text, nil
	}
	return starlib.ReadSource(path)
}

// queryOver returns the analysis queries over a snapshot.
func (s *server) queryOver(sn *snapshot) *analysis.Query {
	return &analysis.Query{Program: sn, Extensions: s.opts.Extensions}
}

// before reports whether p comes before q.
func before(p, q syntax.Position) bool {
	return p.Line < q.Line || p.Line == q.Line && p.Col < q.Col
}
