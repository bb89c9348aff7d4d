package acp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"

	"github.com/aml-go/aml/eval"
)

// hostProcess is an agent started by the trusted local launcher: a host
// process leading its own process group. It implements
// eval.SandboxProcess so that local and sandboxed agents share one
// session engine. Its methods are safe for concurrent use.
type hostProcess struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File

	done     chan struct{}
	code     int
	waitErr  error
	killOnce sync.Once
	killErr  error
}

var _ eval.SandboxProcess = (*hostProcess)(nil)

// startHost starts command with args in dir under env. A missing
// executable is reported with the command and how to fix it.
func startHost(command string, args []string, dir string, env []string) (*hostProcess, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return nil, fmt.Errorf("ACP agent executable %q not found: install it or put it on PATH (or pass its absolute path as command): %w", command, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	setProcessGroup(cmd)
	// Plain pipes (not cmd.*Pipe) so that reaping the process never closes
	// the parent's read ends before the session has read everything.
	var parent []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parent)
			return nil, fmt.Errorf("starting ACP agent %q: %w", command, err)
		}
		parent = append(parent, r, w)
	}
	// The child reads stdin from inR and writes stdout and stderr to outW
	// and errW; the parent keeps the other ends.
	inR, inW, outR, outW, errR, errW := parent[0], parent[1], parent[2], parent[3], parent[4], parent[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(parent)
		return nil, fmt.Errorf("starting ACP agent %q: %w", command, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	stdin, stdout, stderr := inW, outR, errR
	p := &hostProcess{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	go p.reap()
	return p, nil
}

// reap waits for the leader and records its exit.
func (p *hostProcess) reap() {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		p.code = 0
	case errors.As(err, &ee):
		p.code = exitStatus(ee.ProcessState)
	default:
		p.code = -1
		p.waitErr = err
	}
	close(p.done)
}

// ID implements eval.SandboxProcess: the host PID as an opaque string.
func (p *hostProcess) ID() string { return "host-" + strconv.Itoa(p.cmd.Process.Pid) }

// Stdin implements eval.SandboxProcess.
func (p *hostProcess) Stdin() io.WriteCloser { return p.stdin }

// Stdout implements eval.SandboxProcess.
func (p *hostProcess) Stdout() io.Reader { return p.stdout }

// Stderr implements eval.SandboxProcess.
func (p *hostProcess) Stderr() io.Reader { return p.stderr }

// Kill implements eval.SandboxProcess: it kills the process group once.
func (p *hostProcess) Kill() error {
	p.killOnce.Do(func() { p.killErr = killTree(p.cmd) })
	return p.killErr
}

// closePipes closes the parent's ends of the pipes; repeat-safe.
func (p *hostProcess) closePipes() {
	p.stdin.Close()
	p.stdout.Close()
	p.stderr.Close()
}

// Wait implements eval.SandboxProcess.
func (p *hostProcess) Wait() (int, error) {
	<-p.done
	return p.code, p.waitErr
}

// exitStatus is the exit code, or 128+signal for a signalled process.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	return signalCode(ps)
}
