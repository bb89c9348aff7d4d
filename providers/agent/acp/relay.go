package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment variables that configure the stdio relay. The secret is
// passed in the environment, never as an argument, so that it does not
// show in process listings.
const (
	RelayURLEnv   = "AML_MCP_BRIDGE_URL"
	RelayTokenEnv = "AML_MCP_BRIDGE_TOKEN"
)

// RelayOptions configure RunRelay.
type RelayOptions struct {
	// Getenv reads the bridge URL and secret; nil uses os.Getenv.
	Getenv func(string) string
	// Version is the version announced on both sides; "" means "dev".
	Version string
}

// RunRelay serves the tool bridge at the URL and token of RelayURLEnv and
// RelayTokenEnv (from getenv) as a stdio MCP server on in and out, for
// agents that only attach stdio MCP servers. It lists the bridge's tools
// once, forwards every call, and returns when in closes or ctx ends.
func RunRelay(ctx context.Context, in io.ReadCloser, out io.WriteCloser, opts RelayOptions) error {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	url, token := getenv(RelayURLEnv), getenv(RelayTokenEnv)
	if url == "" || token == "" {
		return fmt.Errorf("aml mcp-relay: %s and %s must be set; the relay is started by the ACP engine, not by hand", RelayURLEnv, RelayTokenEnv)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "aml-mcp-relay", Version: version}, nil)
	var next http.RoundTripper = http.DefaultTransport
	if socket, ok := strings.CutPrefix(url, "unix://"); ok {
		// The bridge of an agent in a sandbox without the host's network:
		// HTTP over a unix socket in a directory the sandbox shares.
		next = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, socket, socketWait)
		}}
		url = "http://aml-bridge/mcp"
	}
	httpClient := &http.Client{Transport: bearer{token: token, next: next}}
	up, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return fmt.Errorf("aml mcp-relay: connecting to the tool bridge: %w", err)
	}
	defer up.Close()
	tools, err := up.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("aml mcp-relay: listing the bridge's tools: %w", err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "aml", Version: version}, nil)
	for _, t := range tools.Tools {
		name := t.Name
		server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		})
	}
	err = server.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return fmt.Errorf("aml mcp-relay: %w", err)
	}
	return nil
}

// bearer adds the bridge's Authorization header.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// socketWait bounds how long the relay waits for the bridge's socket to
// appear: in a remote sandbox a tunnel makes it, shortly after the host
// made its own.
const socketWait = 10 * time.Second

// dialSocket connects to the unix socket at path, trying again while it
// does not exist yet or refuses, for up to wait.
func dialSocket(ctx context.Context, path string, wait time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil || !(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
