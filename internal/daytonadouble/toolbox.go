package daytonadouble

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/uuid"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// The daemon's labels of a log line's stream.
var (
	stdoutPrefix = []byte{1, 1, 1}
	stderrPrefix = []byte{2, 2, 2}
)

// session is a process session of a sandbox.
type session struct {
	id       string
	mu       sync.Mutex
	commands map[string]*command
	killed   bool
}

// command is one command executed in a session.
type command struct {
	id       string
	text     string
	suppress bool
	proc     remote.Process

	mu      sync.Mutex
	log     []byte
	exit    *int
	ended   bool          // exit known, or the session killed
	changed chan struct{} // closed and replaced on every change
}

func newCommand(text string, suppress bool) *command {
	return &command{id: uuid.NewString(), text: text, suppress: suppress, changed: make(chan struct{})}
}

// appendLog adds bytes to the command's log.
func (c *command) appendLog(b ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range b {
		c.log = append(c.log, p...)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// end records the command's end (its exit code, or none when killed).
func (c *command) end(code *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.exit, c.ended = code, true
	close(c.changed)
	c.changed = make(chan struct{})
}

// snapshot returns the log from offset, whether the command ended, and a
// channel closed on the next change.
func (c *command) snapshot(from int) ([]byte, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b []byte
	if from < len(c.log) {
		b = c.log[from:]
	}
	return b, c.ended, c.changed
}

func (c *command) exitCode() *int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exit
}

// kill ends every command of the session (the daemon signals the
// session shell's process group).
func (ss *session) kill() {
	ss.mu.Lock()
	ss.killed = true
	cmds := make([]*command, 0, len(ss.commands))
	for _, c := range ss.commands {
		cmds = append(cmds, c)
	}
	ss.mu.Unlock()
	for _, c := range cmds {
		if c.proc != nil {
			_ = c.proc.Kill()
		}
		c.end(nil)
	}
}

// started returns the sandbox of a toolbox request when it runs, or
// answers the request.
func (s *Server) started(ex *exchange) (*Sandbox, remote.Machine) {
	b := s.Sandbox(ex.box)
	if b == nil {
		writeJSON(ex.w, http.StatusNotFound, toolboxError(http.StatusNotFound, "sandbox "+ex.box+" not found"))
		return nil, nil
	}
	m := b.Machine()
	if m == nil {
		writeJSON(ex.w, http.StatusConflict, toolboxError(http.StatusConflict, "sandbox "+ex.box+" is not started (state "+b.State()+")"))
		return nil, nil
	}
	return b, m
}

func (b *Sandbox) session(id string) *session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

func (s *Server) serveToolbox(ex *exchange) {
	b, m := s.started(ex)
	if b == nil {
		return
	}
	switch ex.op {
	case "GetUserHomeDir":
		writeJSON(ex.w, http.StatusOK, map[string]any{"dir": Home})
	case "CreateSession":
		var req struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(ex.body, &req)
		b.mu.Lock()
		_, dup := b.sessions[req.SessionID]
		if !dup {
			b.sessions[req.SessionID] = &session{id: req.SessionID, commands: map[string]*command{}}
		}
		b.mu.Unlock()
		if dup {
			writeJSON(ex.w, http.StatusConflict, toolboxError(http.StatusConflict, "session already exists"))
			return
		}
		ex.w.WriteHeader(http.StatusCreated)
	case "DeleteSession":
		b.mu.Lock()
		ss := b.sessions[ex.params["sessionId"]]
		delete(b.sessions, ex.params["sessionId"])
		b.mu.Unlock()
		if ss == nil {
			writeJSON(ex.w, http.StatusNotFound, toolboxError(http.StatusNotFound, "session not found"))
			return
		}
		ss.kill()
		ex.w.WriteHeader(http.StatusNoContent)
	case "SessionExecuteCommand":
		s.execute(ex, b, m)
	case "GetSessionCommand":
		_, c := s.sessionCommand(ex, b)
		if c == nil {
			return
		}
		out := map[string]any{"id": c.id, "command": c.text}
		if code := c.exitCode(); code != nil {
			out["exitCode"] = *code
		}
		writeJSON(ex.w, http.StatusOK, out)
	case "GetSessionCommandLogs":
		s.logs(ex, b)
	case "SendInput":
		s.input(ex, b)
	case "UploadFile":
		s.upload(ex, m)
	case "DownloadFile":
		s.download(ex, m)
	default:
		s.fail("%s %s: the toolbox operation %s is not served by the double", ex.r.Method, ex.r.URL.Path, ex.op)
		writeJSON(ex.w, http.StatusNotImplemented, toolboxError(http.StatusNotImplemented, ex.op+" is not implemented"))
	}
}

func (s *Server) sessionCommand(ex *exchange, b *Sandbox) (*session, *command) {
	ss := b.session(ex.params["sessionId"])
	if ss == nil {
		writeJSON(ex.w, http.StatusNotFound, toolboxError(http.StatusNotFound, "session not found"))
		return nil, nil
	}
	ss.mu.Lock()
	c := ss.commands[ex.params["commandId"]]
	ss.mu.Unlock()
	if c == nil {
		writeJSON(ex.w, http.StatusNotFound, toolboxError(http.StatusNotFound, "command not found"))
		return nil, nil
	}
	return ss, c
}

// execute runs a command: sh -c with the command text, in the home, its
// standard input held open; its output labelled into its log.
func (s *Server) execute(ex *exchange, b *Sandbox, m remote.Machine) {
	ss := b.session(ex.params["sessionId"])
	if ss == nil {
		writeJSON(ex.w, http.StatusNotFound, toolboxError(http.StatusNotFound, "session not found"))
		return
	}
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	_ = json.Unmarshal(ex.body, &req)
	if strings.TrimSpace(req.Command) == "" {
		writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "command cannot be empty"))
		return
	}
	async := req.RunAsync || req.Async
	c := newCommand(req.Command, req.SuppressInputEcho)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	proc, err := m.Start(ctx, remote.Command{Args: []string{"/bin/sh", "-c", req.Command}, Stdin: true, Env: b.env})
	cancel()
	if err != nil {
		writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "failed to write command: "+err.Error()))
		return
	}
	c.proc = proc
	ss.mu.Lock()
	killed := ss.killed
	ss.commands[c.id] = c
	ss.mu.Unlock()
	if killed {
		_ = proc.Kill()
		c.end(nil)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); label(c, proc.Stdout(), stdoutPrefix) }()
		go func() { defer wg.Done(); label(c, proc.Stderr(), stderrPrefix) }()
		wg.Wait()
		code, err := proc.Wait()
		ss.mu.Lock()
		killed := ss.killed
		ss.mu.Unlock()
		if err != nil || killed {
			c.end(nil)
			return
		}
		c.end(&code)
	}()
	if async {
		writeJSON(ex.w, http.StatusAccepted, map[string]any{"cmdId": c.id})
		return
	}
	for {
		log, ended, changed := c.snapshot(0)
		if ended {
			out := map[string]any{"cmdId": c.id, "output": string(log)}
			if code := c.exitCode(); code != nil {
				out["exitCode"] = *code
			}
			stdout, stderr := demux(log)
			out["stdout"], out["stderr"] = string(stdout), string(stderr)
			writeJSON(ex.w, http.StatusOK, out)
			return
		}
		select {
		case <-changed:
		case <-s.ctx.Done():
			return
		}
	}
}

// label copies one output stream into the log line by line, each line
// prefixed, as the daemon's labellers (IFS= read -r line || [ -n "$line" ];
// printf '<prefix>%s\n' "$line") do: a last partial line gains a newline,
// NUL bytes are lost, and each line is appended whole.
func label(c *command, r io.Reader, prefix []byte) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.ReplaceAll(line, []byte{0}, nil)
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			c.appendLog(prefix, line)
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
}

// demux splits a log into its streams.
func demux(log []byte) (stdout, stderr []byte) {
	for len(log) >= 3 {
		p := log[:3]
		rest := log[3:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		switch {
		case bytes.Equal(p, stdoutPrefix):
			stdout = append(stdout, rest[:i+1]...)
		case bytes.Equal(p, stderrPrefix):
			stderr = append(stderr, rest[:i+1]...)
		}
		log = rest[i+1:]
	}
	return stdout, stderr
}

// logs serves a command's log: over WebSocket, the raw labelled log as
// binary messages (following it to the command's end with follow=true),
// else as JSON with the streams apart.
func (s *Server) logs(ex *exchange, b *Sandbox) {
	_, c := s.sessionCommand(ex, b)
	if c == nil {
		return
	}
	if ex.r.Header.Get("X-Daytona-Split-Output") != "true" {
		s.fail("%s %s: logs asked for without X-Daytona-Split-Output: true (the daemon would merge stdout and stderr)", ex.r.Method, ex.r.URL.Path)
	}
	if !strings.EqualFold(ex.r.Header.Get("Upgrade"), "websocket") {
		log, _, _ := c.snapshot(0)
		stdout, stderr := demux(log)
		combined := append(append([]byte(nil), stdout...), stderr...)
		writeJSON(ex.w, http.StatusOK, map[string]any{"output": string(combined), "stdout": string(stdout), "stderr": string(stderr)})
		return
	}
	follow := ex.r.URL.Query().Get("follow") == "true"
	conn, err := websocket.Accept(ex.w, ex.r, nil)
	if err != nil {
		s.fail("%s %s: upgrading to a WebSocket: %v", ex.r.Method, ex.r.URL.Path, err)
		return
	}
	ctx := conn.CloseRead(s.ctx)
	cut := s.logsCut()
	sent := 0
	for {
		chunk, ended, changed := c.snapshot(sent)
		for len(chunk) > 0 {
			n := min(len(chunk), 32<<10)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := conn.Write(wctx, websocket.MessageBinary, chunk[:n])
			cancel()
			if err != nil {
				conn.CloseNow()
				return
			}
			sent += n
			chunk = chunk[n:]
		}
		if ended || !follow {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-changed:
		case <-b.cut:
			// The machine is gone: the connection breaks, nothing closes
			// it cleanly.
			conn.CloseNow()
			return
		case <-cut:
			conn.CloseNow()
			return
		case <-ctx.Done():
			conn.CloseNow()
			return
		}
	}
}

// input writes to a running command's standard input.
func (s *Server) input(ex *exchange, b *Sandbox) {
	_, c := s.sessionCommand(ex, b)
	if c == nil {
		return
	}
	var req struct {
		Data string `json:"data"`
	}
	_ = json.Unmarshal(ex.body, &req)
	c.mu.Lock()
	ended, code := c.ended, c.exit
	c.mu.Unlock()
	if ended {
		msg := "command has already completed"
		if code != nil {
			msg = fmt.Sprintf("command has already completed with exit code %d", *code)
		}
		writeJSON(ex.w, http.StatusGone, toolboxError(http.StatusGone, msg))
		return
	}
	data := req.Data
	if !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	if _, err := io.WriteString(c.proc.Stdin(), data); err != nil {
		writeJSON(ex.w, http.StatusInternalServerError, toolboxError(http.StatusInternalServerError, "failed to write to input pipe: "+err.Error()))
		return
	}
	if !c.suppress {
		c.appendLog(stdoutPrefix, []byte(data))
	}
	ex.w.WriteHeader(http.StatusNoContent)
}

// guestPath resolves a toolbox path against the home.
func guestPath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(Home, p)
}

// upload streams the multipart request's file part into the sandbox.
// The request body was not validated yet (it may be large): its parts are
// validated here, with the file's content replaced by a few bytes.
func (s *Server) upload(ex *exchange, m remote.Machine) {
	dst := ex.r.URL.Query().Get("path")
	mr, err := ex.r.MultipartReader()
	if err != nil {
		s.fail("%s %s: not a multipart/form-data body: %v", ex.r.Method, ex.r.URL.Path, err)
		writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "invalid multipart body: "+err.Error()))
		return
	}
	var surrogate bytes.Buffer
	sw := multipart.NewWriter(&surrogate)
	var uploadErr error
	files := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.fail("%s %s: reading the multipart body: %v", ex.r.Method, ex.r.URL.Path, err)
			writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "invalid multipart body: "+err.Error()))
			return
		}
		pw, _ := sw.CreatePart(part.Header)
		if part.FormName() == "file" && files == 0 {
			files++
			_, _ = pw.Write([]byte("content"))
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
			uploadErr = m.Upload(ctx, guestPath(dst), part)
			cancel()
		} else {
			_, _ = io.Copy(pw, io.LimitReader(part, 1<<20))
		}
		_, _ = io.Copy(io.Discard, part)
	}
	_ = sw.Close()
	r := ex.r.Clone(s.ctx)
	r.Header.Set("Content-Type", sw.FormDataContentType())
	r.Body = io.NopCloser(bytes.NewReader(surrogate.Bytes()))
	route, params, err := s.tool.route(r, "/files/upload")
	if err == nil {
		err = validateRequest(s.ctx, r, "/files/upload", route, params, surrogate.Bytes(), false)
	}
	if err != nil {
		s.fail("request %s %s (UploadFile) does not match the toolbox OpenAPI document: %v", ex.r.Method, ex.r.URL.Path, err)
	}
	switch {
	case files == 0:
		writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "no file part"))
	case uploadErr != nil:
		writeJSON(ex.w, http.StatusBadRequest, toolboxError(http.StatusBadRequest, "failed to upload "+dst+": "+uploadErr.Error()))
	default:
		writeJSON(ex.w, http.StatusOK, map[string]any{})
	}
}

// download streams a file of the sandbox.
func (s *Server) download(ex *exchange, m remote.Machine) {
	p := ex.r.URL.Query().Get("path")
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	rc, err := m.Download(ctx, guestPath(p))
	if err != nil {
		status := http.StatusBadRequest
		if cerrdefs.IsNotFound(err) || errors.Is(err, io.EOF) {
			status = http.StatusNotFound
		}
		writeJSON(ex.w, status, toolboxError(status, "failed to download "+p+": "+err.Error()))
		return
	}
	defer rc.Close()
	// The body is not kept: its status and headers are still checked.
	ex.w.nocapture = true
	ex.w.Header().Set("Content-Type", "application/octet-stream")
	ex.w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	ex.w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	stallAfter := s.stallAfter
	s.mu.Unlock()
	if stallAfter < 0 {
		_, _ = io.Copy(ex.w, rc)
		return
	}
	_, _ = io.Copy(ex.w, io.LimitReader(rc, stallAfter))
	ex.w.Flush()
	select {
	case <-ex.r.Context().Done():
	case <-s.ctx.Done():
	}
}
