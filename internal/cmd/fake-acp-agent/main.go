// Command fake-acp-agent is the scriptable fake ACP agent of package
// acptest as a program of its own, so that a static build of it runs
// where a test binary cannot (inside a container). Run with the argument
// mcp-relay, it is the tool bridge's stdio relay instead, like aml
// mcp-relay; with sandbox-tunnel DIR, the guest end of a remote sandbox's
// tunnel, like aml sandbox-tunnel; with version, it prints its name.
package main

import (
	"context"
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
	if len(os.Args) > 2 && os.Args[1] == "sandbox-tunnel" {
		if err := tunnel.Guest(context.Background(), os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(acptest.Serve())
}
