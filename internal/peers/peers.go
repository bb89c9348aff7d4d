// Package peers locates the third-party programs (real ACP agents and MCP
// servers from npm) that end-to-end tests drive. .ci/run installs them
// into one cache directory; a test whose peer is missing skips and says
// how to install it.
package peers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/eval"
)

// EverythingPkg is the MCP reference server .ci/run installs.
const EverythingPkg = "@modelcontextprotocol/server-everything@2026.8.31"

// EverythingTransport is one way to reach the MCP reference server.
type EverythingTransport struct {
	// Name is "stdio" or "http".
	Name      string
	Transport eval.MCPTransport
}

// EverythingTransports returns the MCP reference server over stdio and
// over streamable HTTP (started for the rest of t), for the tests of an
// agent's mcp() grants, or skips t when the server is not installed.
func EverythingTransports(t testing.TB) []EverythingTransport {
	t.Helper()
	bin := Bin(t, "mcp-server-everything", EverythingPkg)
	return []EverythingTransport{
		{"stdio", eval.MCPTransport{Type: "stdio", Command: bin, Args: []string{"stdio"}}},
		{"http", eval.MCPTransport{Type: "streamable-http", URL: EverythingHTTP(t)}},
	}
}

// EverythingHTTP starts the MCP reference server over streamable HTTP on
// a free loopback port for the rest of t and returns its URL, or skips t
// when the server is not installed.
func EverythingHTTP(t testing.TB) string {
	t.Helper()
	bin := Bin(t, "mcp-server-everything", EverythingPkg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server did not listen on %s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dir is the peer cache: $AML_PEERS_DIR, else ~/.cache/aml-peers.
func Dir() string {
	if d := os.Getenv("AML_PEERS_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "aml-peers")
	}
	return filepath.Join(home, ".cache", "aml-peers")
}

// Bin returns the path of an installed npm executable, or skips t with
// the install command for pkg when it is missing.
func Bin(t testing.TB, name, pkg string) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed in %s: run `npm install --prefix %s %s` (.ci/run does this), or set AML_PEERS_DIR", name, Dir(), Dir(), pkg)
	}
	return p
}

// File returns the path of a file inside an installed npm package (rel
// is relative to node_modules, as "mermaid/dist/mermaid.min.js"), or
// skips t with the install command for pkg when it is missing.
func File(t testing.TB, rel, pkg string) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed in %s: run `npm install --prefix %s %s` (.ci/run does this), or set AML_PEERS_DIR", rel, Dir(), Dir(), pkg)
	}
	return p
}
