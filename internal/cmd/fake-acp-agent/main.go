// Command fake-acp-agent is the scriptable fake ACP agent of package
// acptest as a program of its own, so that a static build of it runs
// where a test binary cannot (inside a container). Run with the argument
// mcp-relay, it is the tool bridge's stdio relay instead, like aml
// mcp-relay; with model-relay, the model gateway's relay, like aml
// model-relay; with sandbox-tunnel DIR, the guest end of a remote
// sandbox's tunnel, like aml sandbox-tunnel; with version, it prints its
// name.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/aml-go/aml/internal/tunnel"
	"github.com/aml-go/aml/providers/agent/acp"
	"github.com/aml-go/aml/providers/agent/acp/acptest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("fake-acp-agent")
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "mcp-relay" {
		if err := acp.RunRelay(context.Background(), os.Stdin, os.Stdout, acp.RelayOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "model-relay" {
		os.Exit(modelRelay(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "sandbox-tunnel" {
		if err := tunnel.Guest(context.Background(), os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(acptest.Serve())
}

// modelRelay runs acp.RunModelRelay from the arguments aml model-relay
// takes: --socket PATH --port N -- COMMAND ARGS...
func modelRelay(args []string) int {
	fs := flag.NewFlagSet("model-relay", flag.ContinueOnError)
	socket := fs.String("socket", "", "the gateway's socket")
	port := fs.Int("port", 0, "the loopback port to listen on")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: model-relay --socket PATH --port N -- COMMAND ARGS...")
		return 2
	}
	return acp.RunModelRelay(*socket, *port, fs.Arg(0), fs.Args()[1:], os.Stderr)
}
