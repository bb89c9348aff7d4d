package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aml-go/aml/internal/tunnel"
	"github.com/aml-go/aml/providers/agent/acp"
)

// relayCommand is how an ACP agent starts this executable as the stdio
// relay to the tool bridge: aml-full has the aml beside it do it, which
// starts without the services' SDKs.
func relayCommand() []string {
	self := os.Args[0]
	if !strings.ContainsRune(self, filepath.Separator) {
		if p, err := exec.LookPath(self); err == nil {
			self = p
		}
	}
	if abs, err := filepath.Abs(self); err == nil {
		self = abs
	}
	if filepath.Base(self) == companionName {
		light := filepath.Join(filepath.Dir(self), "aml")
		if info, err := os.Stat(light); err == nil && info.Mode().IsRegular() {
			self = light
		}
	}
	return []string{self, "mcp-relay"}
}

// cmdMCPRelay serves the tool bridge named by the environment over stdio.
func cmdMCPRelay(stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := acp.RunRelay(ctx, io.NopCloser(stdin), nopWriteCloser{stdout}, acp.RelayOptions{Version: amlVersion()}); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

const sandboxTunnelUsage = `usage: aml sandbox-tunnel DIR

Carries unix socket connections between a remote sandbox and the aml
process that started it over its standard streams: it listens in DIR on
the socket names aml sends, so that an agent's tool relay in the sandbox
reaches the tool bridge on the host. aml starts it itself in Daytona and
Modal sandboxes, never by hand.`

// cmdSandboxTunnel runs the guest end of a remote sandbox's tunnel.
func cmdSandboxTunnel(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, sandboxTunnelUsage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tunnel.Guest(ctx, args[0], stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "aml sandbox-tunnel: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// cmdModelRelay runs an agent in a sandbox with a loopback port carried
// to AML's model gateway (acp.RunModelRelay).
func cmdModelRelay(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("model-relay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "")
	port := fs.Int("port", 0, "")
	if err := fs.Parse(args); err != nil || *socket == "" || *port <= 0 || *port > 65535 || fs.NArg() == 0 {
		fmt.Fprintln(stderr, acp.ModelRelayUsage)
		return exitUsage
	}
	return acp.RunModelRelay(*socket, *port, fs.Arg(0), fs.Args()[1:], stderr)
}
