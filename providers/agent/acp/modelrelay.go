package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// ModelRelayUsage is the usage text of aml model-relay.
const ModelRelayUsage = `usage: aml model-relay --socket PATH --port N -- COMMAND [ARG...]

Runs COMMAND (an agent) in a sandbox with 127.0.0.1:N carried to AML's
model gateway over the unix socket PATH, so that an agent without network
access still reaches its model, through the gateway and nothing else. aml
starts it itself around agents it meters in sandboxes, never by hand.`

// RunModelRelay is aml model-relay: it listens on 127.0.0.1:port, carries
// each connection to the unix socket at socket (waiting for it to appear,
// as a tunnel makes it a moment after the host), and runs command with
// args on the process's own standard streams, forwarding SIGINT and
// SIGTERM; it returns the command's exit code.
func RunModelRelay(socket string, port int, command string, args []string, stderr io.Writer) int {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(stderr, "aml model-relay: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go carry(ctx, conn, socket)
		}
	}()
	defer func() {
		ln.Close()
		wg.Wait()
	}()
	cmd := exec.Command(command, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "aml model-relay: %v\n", err)
		return 127
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if code := ee.ExitCode(); code >= 0 {
			return code
		}
		return 128 + int(syscall.SIGKILL)
	}
	fmt.Fprintf(stderr, "aml model-relay: %v\n", err)
	return 1
}

// carry copies one connection to the socket and back.
func carry(ctx context.Context, conn net.Conn, socket string) {
	defer conn.Close()
	up, err := dialSocket(ctx, socket, socketWait)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, conn)
		if c, ok := up.(*net.UnixConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, up)
		if c, ok := conn.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}
