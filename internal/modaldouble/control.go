package modaldouble

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// control serves the ModalClient service (the control plane).
type control struct {
	pb.UnimplementedModalClientServer
	d *Double
}

// imageBuilderVersion is what the environments report.
const imageBuilderVersion = "2025.06"

// defaultLifetime is a sandbox's lifetime when its definition gives none
// (Modal's default).
const defaultLifetime = 5 * time.Minute

// sandbox is one Modal sandbox. Its fields are guarded by Double.mu,
// but for the immutable ones (set before it is published).
type sandbox struct {
	id, appID, env string
	v2             bool
	createdAt      float64
	workdir        string
	vars           map[string]string
	lifetime       time.Duration

	tags    map[string]string
	taskID  string
	machine remote.Machine
	// ready is closed when the container runs, or the sandbox finished
	// before it did.
	ready chan struct{}
	// done is closed when result is set.
	done   chan struct{}
	result *pb.GenericResult
	timer  *time.Timer
	execs  map[string]*execution
}

// AuthTokenGet issues an auth token for an hour (a JWT whose expiry the
// SDK reads).
func (c *control) AuthTokenGet(ctx context.Context, req *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	tok := jwt(map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "jti": randomID(12)})
	c.d.mu.Lock()
	c.d.authTokens[tok] = true
	c.d.mu.Unlock()
	return pb.AuthTokenGetResponse_builder{Token: tok}.Build(), nil
}

func envName(name string) string {
	if name == "" {
		return "main"
	}
	return name
}

// EnvironmentGetOrCreate returns an environment ("main" by default) and
// its image builder version.
func (c *control) EnvironmentGetOrCreate(ctx context.Context, req *pb.EnvironmentGetOrCreateRequest) (*pb.EnvironmentGetOrCreateResponse, error) {
	d := c.d
	name := envName(req.GetDeploymentName())
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.envs[name]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "Environment '%s' not found", name)
		}
		id = "en-" + randomID(20)
		d.envs[name] = id
	}
	return pb.EnvironmentGetOrCreateResponse_builder{
		EnvironmentId: id,
		Metadata: pb.EnvironmentMetadata_builder{
			Name:     name,
			Settings: pb.EnvironmentSettings_builder{ImageBuilderVersion: imageBuilderVersion}.Build(),
		}.Build(),
	}.Build(), nil
}

// environment checks that the environment name exists.
func (d *Double) environment(name string) (string, error) {
	name = envName(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.envs[name]; !ok {
		return "", status.Errorf(codes.NotFound, "Environment '%s' not found", name)
	}
	return name, nil
}

// AppGetOrCreate looks an app up by name, making it when asked to.
func (c *control) AppGetOrCreate(ctx context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	d := c.d
	env, err := d.environment(req.GetEnvironmentName())
	if err != nil {
		return nil, err
	}
	if req.GetAppName() == "" {
		return nil, status.Error(codes.InvalidArgument, "an app name is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := env + "/" + req.GetAppName()
	a, ok := d.apps[key]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "App '%s' not found in environment '%s'", req.GetAppName(), env)
		}
		a = &app{id: "ap-" + randomID(22), name: req.GetAppName(), env: env}
		d.apps[key] = a
	}
	return pb.AppGetOrCreateResponse_builder{
		AppId:          a.id,
		HandleMetadata: pb.AppHandleMetadata_builder{AppId: a.id, EnvironmentName: env}.Build(),
	}.Build(), nil
}

// appByID returns the app id names.
func (d *Double) appByID(id string) *app {
	for _, a := range d.apps {
		if a.id == id {
			return a
		}
	}
	return nil
}

// ImageGetOrCreate starts the build of a registry image (FROM <tag>), or
// returns the one of that tag.
func (c *control) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	d := c.d
	cmds := req.GetImage().GetDockerfileCommands()
	if len(cmds) != 1 || !strings.HasPrefix(cmds[0], "FROM ") || len(req.GetImage().GetBaseImages()) > 0 {
		return nil, status.Error(codes.Unimplemented, "the double builds registry images only (one FROM line)")
	}
	tag := strings.TrimSpace(strings.TrimPrefix(cmds[0], "FROM "))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.appByID(req.GetAppId()) == nil {
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", req.GetAppId())
	}
	if id, ok := d.imageByTag[tag]; ok && !req.GetForceBuild() {
		im := d.images[id]
		return pb.ImageGetOrCreateResponse_builder{ImageId: id, Result: im.result}.Build(), nil
	}
	im := &image{id: "im-" + randomID(22), tag: tag, built: make(chan struct{})}
	d.images[im.id] = im
	d.imageByTag[tag] = im.id
	msg, fail := d.failImages[tag]
	delay := d.buildDelay
	d.workers.Add(1)
	go func() {
		defer d.workers.Done()
		time.Sleep(delay)
		res := pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build()
		if fail {
			res = pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_FAILURE, Exception: msg}.Build()
		}
		d.mu.Lock()
		im.result = res
		if fail {
			// A failed build is not cached: the next request builds again.
			delete(d.imageByTag, tag)
		}
		d.mu.Unlock()
		close(im.built)
	}()
	return pb.ImageGetOrCreateResponse_builder{ImageId: im.id}.Build(), nil
}

// ImageJoinStreaming streams a build's log line, then its result.
func (c *control) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, stream grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	d := c.d
	d.mu.Lock()
	im := d.images[req.GetImageId()]
	d.mu.Unlock()
	if im == nil {
		return status.Errorf(codes.NotFound, "Image '%s' not found", req.GetImageId())
	}
	if req.GetLastEntryId() == "" {
		line := pb.TaskLogs_builder{Data: "Building image " + im.id + " from " + im.tag + "\n", FileDescriptor: pb.FileDescriptor_FILE_DESCRIPTOR_INFO}.Build()
		if err := stream.Send(pb.ImageJoinStreamingResponse_builder{TaskLogs: []*pb.TaskLogs{line}, EntryId: "1-0"}.Build()); err != nil {
			return err
		}
	}
	timeout := time.Duration(float64(req.GetTimeout()) * float64(time.Second))
	if timeout <= 0 {
		timeout = 55 * time.Second
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-im.built:
	case <-t.C:
		return nil // the client joins again
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
	d.mu.Lock()
	res := im.result
	d.mu.Unlock()
	if res.GetStatus() == pb.GenericResult_GENERIC_STATUS_FAILURE {
		line := pb.TaskLogs_builder{Data: res.GetException() + "\n", FileDescriptor: pb.FileDescriptor_FILE_DESCRIPTOR_STDERR}.Build()
		if err := stream.Send(pb.ImageJoinStreamingResponse_builder{TaskLogs: []*pb.TaskLogs{line}, EntryId: "2-0"}.Build()); err != nil {
			return err
		}
	}
	return stream.Send(pb.ImageJoinStreamingResponse_builder{Result: res, EntryId: "3-0", Eof: true}.Build())
}

// SecretGetOrCreate keeps a secret made from a map.
func (c *control) SecretGetOrCreate(ctx context.Context, req *pb.SecretGetOrCreateRequest) (*pb.SecretGetOrCreateResponse, error) {
	d := c.d
	if req.GetDeploymentName() != "" {
		return nil, status.Error(codes.Unimplemented, "the double serves secrets made from maps only")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := "st-" + randomID(22)
	d.secrets[id] = maps.Clone(req.GetEnvDict())
	return pb.SecretGetOrCreateResponse_builder{SecretId: id}.Build(), nil
}

// define validates a sandbox definition and returns the sandbox it
// describes, not yet published.
func (d *Double) define(appID string, def *pb.Sandbox, tags []*pb.SandboxTag, sources []*pb.SecretSource, v2 bool) (*sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.appByID(appID)
	if a == nil {
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", appID)
	}
	im := d.images[def.GetImageId()]
	if im == nil || im.result.GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
		return nil, status.Errorf(codes.FailedPrecondition, "Image '%s' is not built", def.GetImageId())
	}
	vars := map[string]string{}
	for _, id := range def.GetSecretIds() {
		s, ok := d.secrets[id]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "Secret '%s' not found", id)
		}
		maps.Copy(vars, s)
	}
	if err := d.sourceVars(vars, sources); err != nil {
		return nil, err
	}
	maps.Copy(vars, def.GetEnvironmentVariables().GetContents())
	workdir := def.GetWorkdir()
	if workdir == "" {
		workdir = "/"
	}
	lifetime := time.Duration(def.GetTimeoutSecs()) * time.Second
	if lifetime == 0 {
		lifetime = defaultLifetime
	}
	sb := &sandbox{
		appID: a.id, env: a.env, v2: v2, workdir: workdir, vars: vars, lifetime: lifetime,
		tags: map[string]string{}, ready: make(chan struct{}), done: make(chan struct{}), execs: map[string]*execution{},
	}
	for _, t := range tags {
		sb.tags[t.GetTagName()] = t.GetTagValue()
	}
	if v2 {
		// The SDK routes an id to the first backend by its shape ("sb-"
		// and 22 characters); V2 ids have another.
		sb.id = "sb-" + randomID(26)
	} else {
		sb.id = "sb-" + randomID(22)
	}
	// Creation times are distinct and increasing: SandboxList pages by
	// them.
	now := float64(time.Now().UnixNano()) / 1e9
	sb.createdAt = max(now, d.lastCreated+1e-3)
	d.lastCreated = sb.createdAt
	return sb, nil
}

// sourceVars adds the variables of secret sources (maps, or secret ids)
// to vars, in order.
func (d *Double) sourceVars(vars map[string]string, sources []*pb.SecretSource) error {
	for _, src := range sources {
		if src.HasSecretId() {
			s, ok := d.secrets[src.GetSecretId()]
			if !ok {
				return status.Errorf(codes.NotFound, "Secret '%s' not found", src.GetSecretId())
			}
			maps.Copy(vars, s)
			continue
		}
		maps.Copy(vars, src.GetEnv().GetContents())
	}
	return nil
}

// provision publishes sb and starts its container in the background; the
// container outlives the call that asked for it.
func (d *Double) provision(sb *sandbox) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return status.Error(codes.Unavailable, "the double is closing")
	}
	d.sandboxes[sb.id] = sb
	delay := d.createDelay
	d.workers.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.workers.Done()
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-sb.done:
			t.Stop()
		}
		var m remote.Machine
		var err error
		select {
		case <-sb.done:
			err = fmt.Errorf("terminated while it was provisioned")
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			m, err = d.docker.Create(ctx, remote.CreateRequest{Labels: map[string]string{"aml-modaldouble": sb.id}})
			if err == nil && sb.workdir != "/" {
				err = run(ctx, m, "mkdir", "-p", "--", sb.workdir)
			}
			cancel()
		}
		d.mu.Lock()
		if sb.result != nil || err != nil {
			d.mu.Unlock()
			if m != nil {
				_ = m.Destroy(context.Background())
			}
			if err != nil {
				d.finish(sb, pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_INIT_FAILURE, Exception: err.Error()}.Build())
			}
			close(sb.ready)
			return
		}
		sb.machine = m
		sb.taskID = "ta-" + randomID(22)
		d.tasks[sb.taskID] = sb
		sb.timer = time.AfterFunc(sb.lifetime, func() {
			d.finish(sb, pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_TIMEOUT, Exception: "the sandbox reached its timeout"}.Build())
		})
		d.mu.Unlock()
		close(sb.ready)
	}()
	return nil
}

// run runs argv in m to completion, failing unless it exits 0.
func run(ctx context.Context, m remote.Machine, argv ...string) error {
	p, err := m.Start(ctx, remote.Command{Args: argv})
	if err != nil {
		return err
	}
	var msg strings.Builder
	go io.Copy(io.Discard, p.Stdout())
	_, _ = io.Copy(&msg, io.LimitReader(p.Stderr(), 4096))
	code, err := p.Wait()
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited %d: %s", argv[0], code, strings.TrimSpace(msg.String()))
	}
	return err
}

// finish ends sb with result (the first result wins) and destroys its
// container.
func (d *Double) finish(sb *sandbox, result *pb.GenericResult) {
	d.mu.Lock()
	if sb.result != nil {
		d.mu.Unlock()
		return
	}
	sb.result = result
	close(sb.done)
	if sb.timer != nil {
		sb.timer.Stop()
	}
	m := sb.machine
	d.mu.Unlock()
	if m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = m.Destroy(ctx)
		cancel()
	}
}

// SandboxCreate makes a sandbox of the first backend and answers at once.
func (c *control) SandboxCreate(ctx context.Context, req *pb.SandboxCreateRequest) (*pb.SandboxCreateResponse, error) {
	sb, err := c.d.define(req.GetAppId(), req.GetDefinition(), req.GetTags(), nil, false)
	if err != nil {
		return nil, err
	}
	if err := c.d.provision(sb); err != nil {
		return nil, err
	}
	// The first backend answers at once; the client polls
	// SandboxGetTaskId until the sandbox is scheduled.
	return pb.SandboxCreateResponse_builder{SandboxId: sb.id}.Build(), nil
}

// SandboxCreateV2 makes a V2 sandbox and answers once its task runs.
func (c *control) SandboxCreateV2(ctx context.Context, req *pb.SandboxCreateV2Request) (*pb.SandboxCreateV2Response, error) {
	d := c.d
	sb, err := d.define(req.GetAppId(), req.GetDefinition(), req.GetTags(), req.GetSecretSources(), true)
	if err != nil {
		return nil, err
	}
	if err := d.provision(sb); err != nil {
		return nil, err
	}
	// V2 answers once the task runs. A caller that gives up meanwhile
	// does not undo the creation: the sandbox is made all the same.
	select {
	case <-sb.ready:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	d.mu.Lock()
	taskID, res := sb.taskID, sb.result
	d.mu.Unlock()
	if taskID == "" {
		return nil, status.Errorf(codes.Internal, "the sandbox did not start: %s", res.GetException())
	}
	return pb.SandboxCreateV2Response_builder{
		SandboxId:           sb.id,
		TaskId:              taskID,
		CommandRouterAccess: pb.CommandRouterAccess_builder{Jwt: d.routerToken(taskID), Url: d.routerURL()}.Build(),
	}.Build(), nil
}

// sandboxOf returns the sandbox id names, of the backend the call is for.
func (d *Double) sandboxOf(id string, v2 bool) (*sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.sandboxes[id]
	if sb == nil || sb.v2 != v2 {
		return nil, status.Errorf(codes.NotFound, "Sandbox '%s' not found", id)
	}
	return sb, nil
}

func (c *control) getTaskID(req *pb.SandboxGetTaskIdRequest, v2 bool) (*pb.SandboxGetTaskIdResponse, error) {
	sb, err := c.d.sandboxOf(req.GetSandboxId(), v2)
	if err != nil {
		return nil, err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	b := pb.SandboxGetTaskIdResponse_builder{}
	switch {
	case sb.result != nil:
		b.TaskResult = sb.result
	case sb.taskID != "":
		id := sb.taskID
		b.TaskId = &id
	}
	return b.Build(), nil
}

// SandboxGetTaskId returns the task of a first-backend sandbox, or its
// result once it finished.
func (c *control) SandboxGetTaskId(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	return c.getTaskID(req, false)
}

// SandboxGetTaskIdV2 is SandboxGetTaskId for V2 sandboxes.
func (c *control) SandboxGetTaskIdV2(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	return c.getTaskID(req, true)
}

// TaskGetCommandRouterAccess hands out the router's URL and a JWT for the
// task.
func (c *control) TaskGetCommandRouterAccess(ctx context.Context, req *pb.TaskGetCommandRouterAccessRequest) (*pb.TaskGetCommandRouterAccessResponse, error) {
	d := c.d
	d.mu.Lock()
	sb := d.tasks[req.GetTaskId()]
	d.mu.Unlock()
	if sb == nil {
		return nil, status.Errorf(codes.NotFound, "Task '%s' not found", req.GetTaskId())
	}
	return pb.TaskGetCommandRouterAccessResponse_builder{Jwt: d.routerToken(req.GetTaskId()), Url: d.routerURL()}.Build(), nil
}

// SandboxGetCommandRouterAccess is TaskGetCommandRouterAccess for V2
// sandboxes.
func (c *control) SandboxGetCommandRouterAccess(ctx context.Context, req *pb.SandboxGetCommandRouterAccessRequest) (*pb.SandboxGetCommandRouterAccessResponse, error) {
	d := c.d
	var taskID string
	if req.HasSandboxId() {
		sb, err := d.sandboxOf(req.GetSandboxId(), true)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		taskID = sb.taskID
		d.mu.Unlock()
	} else {
		taskID = req.GetTaskId()
		d.mu.Lock()
		if d.tasks[taskID] == nil {
			taskID = ""
		}
		d.mu.Unlock()
	}
	if taskID == "" {
		return nil, status.Error(codes.NotFound, "the sandbox has no task")
	}
	return pb.SandboxGetCommandRouterAccessResponse_builder{Jwt: d.routerToken(taskID), Url: d.routerURL(), WorkerIpv4Address: "127.0.0.1"}.Build(), nil
}

func (c *control) terminate(req *pb.SandboxTerminateRequest, v2 bool) (*pb.SandboxTerminateResponse, error) {
	sb, err := c.d.sandboxOf(req.GetSandboxId(), v2)
	if err != nil {
		return nil, err
	}
	c.d.mu.Lock()
	existing := sb.result
	c.d.mu.Unlock()
	if existing != nil {
		return pb.SandboxTerminateResponse_builder{ExistingResult: existing}.Build(), nil
	}
	c.d.finish(sb, terminated("terminated by a client"))
	return &pb.SandboxTerminateResponse{}, nil
}

// SandboxTerminate terminates a first-backend sandbox (its container is
// removed).
func (c *control) SandboxTerminate(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	return c.terminate(req, false)
}

// SandboxTerminateV2 is SandboxTerminate for V2 sandboxes.
func (c *control) SandboxTerminateV2(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	return c.terminate(req, true)
}

func (c *control) wait(ctx context.Context, req *pb.SandboxWaitRequest, v2 bool) (*pb.SandboxWaitResponse, error) {
	sb, err := c.d.sandboxOf(req.GetSandboxId(), v2)
	if err != nil {
		return nil, err
	}
	if timeout := time.Duration(float64(req.GetTimeout()) * float64(time.Second)); timeout > 0 {
		t := time.NewTimer(timeout)
		select {
		case <-sb.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return pb.SandboxWaitResponse_builder{
		Result:   sb.result,
		Metadata: pb.SandboxHandleMetadata_builder{Result: sb.result, AppId: sb.appID}.Build(),
	}.Build(), nil
}

// SandboxWait waits up to the request's timeout for a first-backend
// sandbox to finish.
func (c *control) SandboxWait(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	return c.wait(ctx, req, false)
}

// SandboxWaitV2 is SandboxWait for V2 sandboxes.
func (c *control) SandboxWaitV2(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	return c.wait(ctx, req, true)
}

// listPage is how many sandboxes one SandboxList answer holds at most.
const listPage = 25

func (c *control) list(req *pb.SandboxListRequest, v2 bool) (*pb.SandboxListResponse, error) {
	d := c.d
	env := ""
	if req.GetAppId() == "" {
		var err error
		if env, err = d.environment(req.GetEnvironmentName()); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if req.GetAppId() != "" && d.appByID(req.GetAppId()) == nil {
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", req.GetAppId())
	}
	var match []*sandbox
	for _, sb := range d.sandboxes {
		switch {
		case !v2 && sb.v2: // the first backend lists its own sandboxes only
		case req.GetAppId() != "" && sb.appID != req.GetAppId():
		case env != "" && sb.env != env:
		case sb.result != nil && !req.GetIncludeFinished():
		case req.GetBeforeTimestamp() != 0 && sb.createdAt >= req.GetBeforeTimestamp():
		case !hasTags(sb.tags, req.GetTags()):
		default:
			match = append(match, sb)
		}
	}
	slices.SortFunc(match, func(a, b *sandbox) int {
		switch {
		case a.createdAt > b.createdAt:
			return -1
		case a.createdAt < b.createdAt:
			return 1
		}
		return 0
	})
	if len(match) > listPage {
		match = match[:listPage]
	}
	out := make([]*pb.SandboxInfo, 0, len(match))
	for _, sb := range match {
		out = append(out, pb.SandboxInfo_builder{Id: sb.id, CreatedAt: sb.createdAt, AppId: sb.appID, Tags: tagList(sb.tags)}.Build())
	}
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

func hasTags(have map[string]string, want []*pb.SandboxTag) bool {
	for _, t := range want {
		if v, ok := have[t.GetTagName()]; !ok || v != t.GetTagValue() {
			return false
		}
	}
	return true
}

func tagList(tags map[string]string) []*pb.SandboxTag {
	out := make([]*pb.SandboxTag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, pb.SandboxTag_builder{TagName: k, TagValue: tags[k]}.Build())
	}
	return out
}

// SandboxList lists first-backend sandboxes, newest first, a page at a
// time.
func (c *control) SandboxList(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	return c.list(req, false)
}

// SandboxListV2 lists the sandboxes of both backends.
func (c *control) SandboxListV2(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	return c.list(req, true)
}

func (c *control) tagsGet(req *pb.SandboxTagsGetRequest, v2 bool) (*pb.SandboxTagsGetResponse, error) {
	sb, err := c.d.sandboxOf(req.GetSandboxId(), v2)
	if err != nil {
		return nil, err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return pb.SandboxTagsGetResponse_builder{Tags: tagList(sb.tags)}.Build(), nil
}

// SandboxTagsGet returns a first-backend sandbox's tags.
func (c *control) SandboxTagsGet(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	return c.tagsGet(req, false)
}

// SandboxTagsGetV2 is SandboxTagsGet for V2 sandboxes.
func (c *control) SandboxTagsGetV2(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	return c.tagsGet(req, true)
}

func (c *control) tagsSet(req *pb.SandboxTagsSetRequest, v2 bool) (*emptypb.Empty, error) {
	sb, err := c.d.sandboxOf(req.GetSandboxId(), v2)
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		tags[t.GetTagName()] = t.GetTagValue()
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	sb.tags = tags
	return &emptypb.Empty{}, nil
}

// SandboxTagsSet replaces a first-backend sandbox's tags.
func (c *control) SandboxTagsSet(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	return c.tagsSet(req, false)
}

// SandboxTagsSetV2 is SandboxTagsSet for V2 sandboxes.
func (c *control) SandboxTagsSetV2(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	return c.tagsSet(req, true)
}
