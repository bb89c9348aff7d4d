package daytonadouble

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// Sandbox is one sandbox of the double. Its methods are safe for
// concurrent use.
type Sandbox struct {
	s       *Server
	id      string
	name    string
	labels  map[string]string
	env     map[string]string
	target  string
	created time.Time
	// snapshot or dockerfile, as created.
	snapshot   string
	dockerfile string
	request    map[string]any

	mu       sync.Mutex
	state    string
	reason   string
	machine  remote.Machine
	sessions map[string]*session
	gone     chan struct{} // closed when destroyed
	cut      chan struct{} // closed when destroyed from outside
	goneOnce sync.Once
}

// ID is the sandbox's id.
func (b *Sandbox) ID() string { return b.id }

// Name is the sandbox's name.
func (b *Sandbox) Name() string { return b.name }

// Labels are the sandbox's labels.
func (b *Sandbox) Labels() map[string]string { return maps.Clone(b.labels) }

// State is the sandbox's state ("creating", "started", "build_failed"...).
func (b *Sandbox) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Snapshot is the snapshot the sandbox was created from ("" when built).
func (b *Sandbox) Snapshot() string { return b.snapshot }

// Image is the image the sandbox's Dockerfile names (its FROM line; ""
// when created from a snapshot).
func (b *Sandbox) Image() string {
	img, _ := fromLine(b.dockerfile)
	return img
}

// Dockerfile is the Dockerfile the sandbox was created with.
func (b *Sandbox) Dockerfile() string { return b.dockerfile }

// Request is the create request's body, as decoded JSON; it is shared and
// must not be changed.
func (b *Sandbox) Request() map[string]any { return b.request }

// Sessions returns the ids of the sandbox's process sessions.
func (b *Sandbox) Sessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Machine is the container behind the sandbox (nil until it starts).
func (b *Sandbox) Machine() remote.Machine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.machine
}

// fromLine reads the image of a one-line Dockerfile "FROM <image>".
func fromLine(dockerfile string) (string, bool) {
	f := strings.Fields(dockerfile)
	if len(f) != 2 || !strings.EqualFold(f[0], "FROM") || strings.Count(strings.TrimSpace(dockerfile), "\n") > 0 {
		return "", false
	}
	return f[1], true
}

func (s *Server) serveAPI(ex *exchange) {
	switch ex.op {
	case "createSandbox":
		s.createSandbox(ex)
	case "getSandbox":
		b := s.lookup(ex.params["sandboxIdOrName"])
		if b == nil {
			writeJSON(ex.w, http.StatusNotFound, apiError(http.StatusNotFound, "Sandbox with ID or name "+ex.params["sandboxIdOrName"]+" not found"))
			return
		}
		writeJSON(ex.w, http.StatusOK, s.sandboxJSON(b, false))
	case "deleteSandbox":
		b := s.lookup(ex.params["sandboxIdOrName"])
		if b == nil {
			writeJSON(ex.w, http.StatusNotFound, apiError(http.StatusNotFound, "Sandbox with ID or name "+ex.params["sandboxIdOrName"]+" not found"))
			return
		}
		s.destroy(b, false)
		writeJSON(ex.w, http.StatusOK, s.sandboxJSON(b, false))
	case "listSandboxes":
		s.listSandboxes(ex)
	default:
		s.fail("%s %s: the operation %s is not served by the double", ex.r.Method, ex.r.URL.Path, ex.op)
		writeJSON(ex.w, http.StatusNotImplemented, apiError(http.StatusNotImplemented, ex.op+" is not implemented"))
	}
}

// lookup finds a sandbox by id or name.
func (s *Server) lookup(idOrName string) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.sandboxes[idOrName]; b != nil {
		return b
	}
	for _, b := range s.sandboxes {
		if b.name == idOrName {
			return b
		}
	}
	return nil
}

func (s *Server) createSandbox(ex *exchange) {
	var req struct {
		Name      string            `json:"name"`
		Snapshot  string            `json:"snapshot"`
		Labels    map[string]string `json:"labels"`
		Env       map[string]string `json:"env"`
		Target    string            `json:"target"`
		BuildInfo *struct {
			DockerfileContent string `json:"dockerfileContent"`
		} `json:"buildInfo"`
	}
	var raw map[string]any
	if err := json.Unmarshal(ex.body, &req); err != nil {
		writeJSON(ex.w, http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error()))
		return
	}
	_ = json.Unmarshal(ex.body, &raw)
	if _, ok := raw["image"]; ok {
		// Not in CreateSandbox; the validation let it through because the
		// schema allows other properties.
		s.fail("POST /sandbox: an image field, which the API does not have (use buildInfo.dockerfileContent)")
	}
	if req.Snapshot != "" && req.BuildInfo != nil {
		writeJSON(ex.w, http.StatusBadRequest, apiError(http.StatusBadRequest, "Cannot specify both a snapshot and build info"))
		return
	}
	if req.Snapshot == "" && req.BuildInfo == nil {
		req.Snapshot = DefaultSnapshot
	}
	s.mu.Lock()
	known := s.snapshots[req.Snapshot]
	delay := s.createDelay
	buildFail := s.buildFail
	s.mu.Unlock()
	if req.Snapshot != "" && !known {
		writeJSON(ex.w, http.StatusNotFound, apiError(http.StatusNotFound, "Snapshot "+req.Snapshot+" not found. Did you add it through the Daytona Dashboard?"))
		return
	}
	id := uuid.NewString()
	if req.Name == "" {
		req.Name = id
	}
	if s.lookup(req.Name) != nil {
		writeJSON(ex.w, http.StatusConflict, apiError(http.StatusConflict, "Sandbox with name "+req.Name+" already exists"))
		return
	}
	if req.Target == "" {
		req.Target = "us"
	}
	b := &Sandbox{
		s: s, id: id, name: req.Name, labels: req.Labels, env: req.Env, target: req.Target,
		created: time.Now(), snapshot: req.Snapshot, request: raw,
		state: "creating", sessions: map[string]*session{}, gone: make(chan struct{}), cut: make(chan struct{}),
	}
	if b.labels == nil {
		b.labels = map[string]string{}
	}
	if b.env == nil {
		b.env = map[string]string{}
	}
	if req.BuildInfo != nil {
		b.dockerfile = req.BuildInfo.DockerfileContent
		b.state = "pending_build"
	}
	s.mu.Lock()
	s.sandboxes[id] = b
	answerDelay := s.answerDelay
	s.mu.Unlock()
	if answerDelay > 0 {
		select {
		case <-time.After(answerDelay):
		case <-s.ctx.Done():
		}
	}
	writeJSON(ex.w, http.StatusOK, s.sandboxJSON(b, false))

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-time.After(delay):
		case <-b.gone:
			return
		case <-s.ctx.Done():
			return
		}
		if b.dockerfile != "" {
			if _, ok := fromLine(b.dockerfile); !ok {
				b.setState("build_failed", "the double builds only one-line Dockerfiles (FROM <image>)")
				return
			}
			if buildFail != "" {
				b.setState("build_failed", buildFail)
				return
			}
		}
		m, err := s.docker.Create(s.ctx, remote.CreateRequest{Labels: b.labels})
		if err != nil {
			b.setState("error", "creating the sandbox's container: "+err.Error())
			return
		}
		b.mu.Lock()
		select {
		case <-b.gone:
			b.mu.Unlock()
			_ = m.Destroy(context.Background())
			return
		default:
		}
		b.machine, b.state = m, "started"
		b.mu.Unlock()
	}()
}

func (b *Sandbox) setState(state, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.gone:
		return
	default:
	}
	b.state, b.reason = state, reason
}

// destroy ends a sandbox: its sessions are killed, its log streams end
// (cut off when outside is set, as when the machine vanishes under the
// daemon) and its container is removed.
func (s *Server) destroy(b *Sandbox, outside bool) {
	s.mu.Lock()
	delete(s.sandboxes, b.id)
	s.mu.Unlock()
	b.goneOnce.Do(func() {
		b.mu.Lock()
		b.state = "destroyed"
		if outside {
			close(b.cut)
		}
		close(b.gone)
		m := b.machine
		sessions := make([]*session, 0, len(b.sessions))
		for _, ss := range b.sessions {
			sessions = append(sessions, ss)
		}
		b.sessions = map[string]*session{}
		b.mu.Unlock()
		for _, ss := range sessions {
			ss.kill()
		}
		if m != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := m.Destroy(ctx); err != nil {
				s.fail("removing the container of sandbox %s: %v", b.id, err)
			}
		}
	})
}

// sandboxJSON is a Sandbox (or, with item, a SandboxListItem).
func (s *Server) sandboxJSON(b *Sandbox, item bool) map[string]any {
	b.mu.Lock()
	state, reason := b.state, b.reason
	b.mu.Unlock()
	created := b.created.UTC().Format(time.RFC3339Nano)
	out := map[string]any{
		"id": b.id, "organizationId": "org-double", "name": b.name, "user": "daytona",
		"labels": b.labels, "public": false, "target": b.target,
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3,
		"state": state, "desiredState": "started",
		"createdAt": created, "updatedAt": created,
		"toolboxProxyUrl":  s.ToolboxURL(),
		"autoStopInterval": 15, "autoArchiveInterval": 10080, "autoDeleteInterval": -1,
		"sandboxClass": "container",
	}
	if state == "destroyed" {
		out["desiredState"] = "destroyed"
	}
	if b.snapshot != "" {
		out["snapshot"] = b.snapshot
	}
	if reason != "" {
		out["errorReason"] = reason
		out["recoverable"] = false
	}
	if !item {
		out["env"] = b.env
		out["networkBlockAll"] = false
		if b.dockerfile != "" {
			out["buildInfo"] = map[string]any{
				"dockerfileContent": b.dockerfile,
				"snapshotRef":       "daytona-" + b.id[:8] + ":0.0.1",
				"createdAt":         created, "updatedAt": created,
			}
		}
	}
	return out
}

func (s *Server) listSandboxes(ex *exchange) {
	q := ex.r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			writeJSON(ex.w, http.StatusBadRequest, apiError(http.StatusBadRequest, "labels must be a JSON object of strings: "+err.Error()))
			return
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		if n, err := strconv.ParseFloat(l, 64); err == nil && n >= 1 {
			limit = int(n)
		}
	}
	s.mu.Lock()
	limit = min(limit, s.pageSize)
	s.mu.Unlock()
	var all []*Sandbox
	for _, b := range s.Sandboxes() {
		ok := true
		for k, v := range want {
			if b.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			all = append(all, b)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })
	start := 0
	if c := q.Get("cursor"); c != "" {
		start = len(all)
		for i, b := range all {
			if b.id == c {
				start = i + 1
				break
			}
		}
	}
	end := min(start+limit, len(all))
	items := []map[string]any{}
	for _, b := range all[start:end] {
		items = append(items, s.sandboxJSON(b, true))
	}
	var next any
	if end < len(all) {
		next = all[end-1].id
	}
	writeJSON(ex.w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}
