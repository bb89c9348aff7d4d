// Package peers locates the third-party programs (real ACP agents and MCP
// servers from npm) that end-to-end tests drive. .ci/run installs them
// into one cache directory; a test whose peer is missing skips and says
// how to install it.
package peers

import (
	"os"
	"path/filepath"
	"testing"
)

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
