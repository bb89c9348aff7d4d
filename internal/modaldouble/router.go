package modaldouble

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// router serves the TaskCommandRouter service: the execs of tasks.
type router struct {
	pb.UnimplementedTaskCommandRouterServer
	d *Double
}

// fsTools is the tool the SDK's filesystem API runs in a sandbox.
const fsTools = "/__modal/.bin/modal-sandbox-fs-tools"

// stdioChunk bounds the data of one TaskExecStdioRead message.
const stdioChunk = 64 << 10

// execution is one exec of a task.
type execution struct {
	stdout, stderr *outbuf

	inMu     sync.Mutex
	in       io.WriteCloser
	written  uint64
	inClosed bool

	// done is closed once the process exited and its output is complete;
	// code and signal are set before.
	done   chan struct{}
	code   int32
	signal int32
}

// exit records the process's end: signal when it was killed with its
// container, else code.
func (e *execution) exit(code int, signal int) {
	e.stdout.finish()
	e.stderr.finish()
	e.code, e.signal = int32(code), int32(signal)
	close(e.done)
}

// writeStdin writes data at offset of the process's input (bytes it
// already has are skipped, as the SDK retries), then ends the input when
// eof is set.
func (e *execution) writeStdin(offset uint64, data []byte, eof bool) error {
	e.inMu.Lock()
	defer e.inMu.Unlock()
	if offset > e.written {
		return status.Errorf(codes.InvalidArgument, "stdin offset %d is past the %d bytes written", offset, e.written)
	}
	if skip := e.written - offset; skip < uint64(len(data)) {
		data = data[skip:]
		select {
		case <-e.done:
			return status.Error(codes.FailedPrecondition, "the process has exited")
		default:
		}
		if e.inClosed {
			return status.Error(codes.FailedPrecondition, "stdin is closed")
		}
		n, err := e.in.Write(data)
		e.written += uint64(n)
		if err != nil {
			return status.Errorf(codes.FailedPrecondition, "the process does not take input: %v", err)
		}
	}
	if eof && !e.inClosed {
		e.inClosed = true
		_ = e.in.Close()
	}
	return nil
}

// TaskExecStart starts an exec in the task's container (a retried start
// is accepted once).
func (r *router) TaskExecStart(ctx context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	d := r.d
	sb, err := d.taskFromContext(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	args := req.GetCommandArgs()
	switch {
	case len(args) == 0:
		return nil, status.Error(codes.InvalidArgument, "no command")
	case req.HasPtyInfo():
		return nil, status.Error(codes.Unimplemented, "the double runs no PTY")
	case req.GetContainerId() != "":
		return nil, status.Error(codes.Unimplemented, "the double runs no sidecar containers")
	case req.GetExecId() == "":
		return nil, status.Error(codes.InvalidArgument, "no exec id")
	case d.refused(args):
		return nil, status.Error(codes.FailedPrecondition, "the exec was refused")
	}
	d.mu.Lock()
	if _, ok := sb.execs[req.GetExecId()]; ok {
		d.mu.Unlock()
		return &pb.TaskExecStartResponse{}, nil // a retried start
	}
	if sb.result != nil {
		d.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "task %s has finished", req.GetTaskId())
	}
	vars := maps.Clone(sb.vars)
	for _, id := range req.GetSecretIds() {
		maps.Copy(vars, d.secrets[id])
	}
	err = d.sourceVars(vars, req.GetSecretSources())
	machine := sb.machine
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	maps.Copy(vars, req.GetEnv())
	workdir := sb.workdir
	if req.HasWorkdir() {
		workdir = req.GetWorkdir()
	}
	var timeout time.Duration
	if req.HasTimeoutSecs() {
		timeout = time.Duration(req.GetTimeoutSecs()) * time.Second
	}
	e := &execution{done: make(chan struct{})}
	if e.stdout, err = newOutbuf(d.outDir); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if e.stderr, err = newOutbuf(d.outDir); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	var stdout, stderr io.Writer = e.stdout, e.stderr
	if req.GetStdoutConfig() == pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_DEVNULL {
		stdout = io.Discard
	}
	switch req.GetStderrConfig() {
	case pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_DEVNULL:
		stderr = io.Discard
	case pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_STDOUT:
		stderr = stdout
	}
	if args[0] == fsTools {
		if len(args) != 2 {
			return nil, status.Error(codes.InvalidArgument, "the filesystem tool takes one JSON argument")
		}
		r.fsTool(e, machine, args[1], stdout, stderr)
	} else {
		proc, err := machine.Start(ctx, remote.Command{Args: args, Dir: workdir, Env: vars, Stdin: true, Timeout: timeout})
		if err != nil {
			return nil, status.Errorf(codes.Internal, "starting %q: %v", args[0], err)
		}
		e.in = proc.Stdin()
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(stdout, proc.Stdout()) }()
			go func() { defer wg.Done(); _, _ = io.Copy(stderr, proc.Stderr()) }()
			wg.Wait()
			code, err := proc.Wait()
			if err != nil {
				e.exit(0, 9) // ended with its container
				return
			}
			e.exit(code, 0)
		}()
	}
	d.mu.Lock()
	sb.execs[req.GetExecId()] = e
	d.mu.Unlock()
	return &pb.TaskExecStartResponse{}, nil
}

// fsCommand is the JSON argument of the filesystem tool.
type fsCommand struct {
	WriteFile *struct {
		Path string `json:"path"`
	} `json:"WriteFile"`
	ReadFile *struct {
		Path string `json:"path"`
	} `json:"ReadFile"`
	MakeDirectory *struct {
		Path    string `json:"path"`
		Parents bool   `json:"parents"`
	} `json:"MakeDirectory"`
}

// fsTool runs the filesystem tool's command arg in the background, its
// input the exec's.
func (r *router) fsTool(e *execution, m remote.Machine, arg string, stdout, stderr io.Writer) {
	d := r.d
	pr, pw := io.Pipe()
	e.in = pw
	exited := errors.New("the filesystem tool exited")
	fail := func(kind, msg string) {
		// Input written after this fails (the SDK takes that for a tool
		// that exited early).
		pr.CloseWithError(exited)
		b, _ := json.Marshal(map[string]string{"error_kind": kind, "message": msg, "detail": ""})
		_, _ = stderr.Write(b)
		e.exit(1, 0)
	}
	var cmd fsCommand
	err := json.Unmarshal([]byte(arg), &cmd)
	d.workers.Add(1)
	go func() {
		defer d.workers.Done()
		defer pr.CloseWithError(exited)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		switch {
		case err != nil:
			fail("InvalidArgument", "the command is not JSON: "+err.Error())
		case cmd.WriteFile != nil:
			p := cmd.WriteFile.Path
			code, err := status1(ctx, m, `if [ -d "$1" ]; then exit 21; fi
d=$(dirname -- "$1")
mkdir -p -- "$d" 2>/dev/null || exit 20`, p)
			switch {
			case err != nil:
				fail("Unknown", err.Error())
			case code == 21:
				fail("IsDirectory", "Is a directory")
			case code == 20:
				fail("NotDirectory", "Not a directory")
			case code != 0:
				fail("Unknown", fmt.Sprintf("checking the path exited %d", code))
			default:
				if err := m.Upload(ctx, p, pr); err != nil {
					fail("Unknown", err.Error())
					return
				}
				pr.CloseWithError(exited)
				e.exit(0, 0)
			}
		case cmd.ReadFile != nil:
			_ = pr.Close() // it takes no input
			rc, err := m.Download(ctx, cmd.ReadFile.Path)
			if err != nil {
				switch {
				case cerrdefs.IsNotFound(err):
					fail("NotFound", "No such file or directory")
				case strings.Contains(err.Error(), "not a regular file"):
					fail("IsDirectory", "Is a directory")
				default:
					fail("Unknown", err.Error())
				}
				return
			}
			_, err = io.Copy(stdout, rc)
			rc.Close()
			if err != nil {
				fail("Unknown", err.Error())
				return
			}
			e.exit(0, 0)
		case cmd.MakeDirectory != nil:
			_ = pr.Close()
			script := `mkdir -- "$1" 2>/dev/null || { [ -e "$1" ] && exit 17; exit 2; }`
			if cmd.MakeDirectory.Parents {
				script = `mkdir -p -- "$1" 2>/dev/null || exit 20`
			}
			code, err := status1(ctx, m, script, cmd.MakeDirectory.Path)
			switch {
			case err != nil:
				fail("Unknown", err.Error())
			case code == 17:
				fail("PathAlreadyExists", "File exists")
			case code == 2:
				fail("NotFound", "No such file or directory")
			case code != 0:
				fail("NotDirectory", "Not a directory")
			default:
				e.exit(0, 0)
			}
		default:
			_ = pr.Close()
			fail("NotSupported", "the double's filesystem tool runs WriteFile, ReadFile and MakeDirectory only")
		}
	}()
}

// status1 runs the shell script with the argument arg in m and returns
// its exit status.
func status1(ctx context.Context, m remote.Machine, script, arg string) (int, error) {
	p, err := m.Start(ctx, remote.Command{Args: []string{"/bin/sh", "-c", script, "fs-tools", arg}})
	if err != nil {
		return 0, err
	}
	go io.Copy(io.Discard, p.Stdout())
	_, _ = io.Copy(io.Discard, p.Stderr())
	return p.Wait()
}

// execOf returns the exec execID of taskID.
func (r *router) execOf(ctx context.Context, taskID, execID string) (*execution, error) {
	sb, err := r.d.taskFromContext(ctx, taskID)
	if err != nil {
		return nil, err
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	e := sb.execs[execID]
	if e == nil {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", execID)
	}
	return e, nil
}

// TaskExecStdioRead streams an exec's stdout or stderr from the request's
// offset to its end.
func (r *router) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, stream grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	ctx := stream.Context()
	e, err := r.execOf(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	buf := e.stdout
	if req.GetFileDescriptor() == pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR {
		buf = e.stderr
	}
	off := int64(req.GetOffset())
	chunk := make([]byte, stdioChunk)
	for {
		n, err := buf.readAt(ctx, chunk, off)
		if n > 0 {
			if err := stream.Send(pb.TaskExecStdioReadResponse_builder{Data: chunk[:n]}.Build()); err != nil {
				return err
			}
			off += int64(n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return status.Error(codes.Internal, err.Error())
		}
	}
}

// TaskExecStdinWrite writes an exec's input at an offset.
func (r *router) TaskExecStdinWrite(ctx context.Context, req *pb.TaskExecStdinWriteRequest) (*pb.TaskExecStdinWriteResponse, error) {
	e, err := r.execOf(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	if err := e.writeStdin(req.GetOffset(), req.GetData(), req.GetEof()); err != nil {
		return nil, err
	}
	return &pb.TaskExecStdinWriteResponse{}, nil
}

// TaskExecStdinWriteStream takes an exec's input as a stream: a start,
// data, and an end that closes the input.
func (r *router) TaskExecStdinWriteStream(stream grpc.ClientStreamingServer[pb.TaskExecStdinWriteStreamRequest, pb.TaskExecStdinWriteStreamResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message must be a start")
	}
	e, err := r.execOf(stream.Context(), start.GetTaskId(), start.GetExecId())
	if err != nil {
		return err
	}
	off := start.GetOffset()
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			// Ended without End: the input stays open for a resume.
			return stream.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		}
		if err != nil {
			return err
		}
		switch {
		case msg.HasData():
			if err := e.writeStdin(off, msg.GetData(), false); err != nil {
				return err
			}
			off += uint64(len(msg.GetData()))
		case msg.HasEnd():
			if err := e.writeStdin(off, nil, true); err != nil {
				return err
			}
			return stream.SendAndClose(&pb.TaskExecStdinWriteStreamResponse{})
		default:
			return status.Error(codes.InvalidArgument, "a second start")
		}
	}
}

// TaskExecStdinStatus says how much input an exec took and whether it is
// closed.
func (r *router) TaskExecStdinStatus(ctx context.Context, req *pb.TaskExecStdinStatusRequest) (*pb.TaskExecStdinStatusResponse, error) {
	e, err := r.execOf(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	e.inMu.Lock()
	defer e.inMu.Unlock()
	return pb.TaskExecStdinStatusResponse_builder{NumBytesWritten: e.written, Closed: e.inClosed}.Build(), nil
}

// exitStatus is the status of a finished exec.
func (e *execution) exitStatus() (code, signal *int32) {
	if e.signal != 0 {
		s := e.signal
		return nil, &s
	}
	c := e.code
	return &c, nil
}

// TaskExecWait waits for an exec's exit status.
func (r *router) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	e, err := r.execOf(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	code, signal := e.exitStatus()
	return pb.TaskExecWaitResponse_builder{Code: code, Signal: signal}.Build(), nil
}

// TaskExecPoll returns an exec's exit status if it exited.
func (r *router) TaskExecPoll(ctx context.Context, req *pb.TaskExecPollRequest) (*pb.TaskExecPollResponse, error) {
	e, err := r.execOf(ctx, req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.done:
		code, signal := e.exitStatus()
		return pb.TaskExecPollResponse_builder{Code: code, Signal: signal}.Build(), nil
	default:
		return &pb.TaskExecPollResponse{}, nil
	}
}
