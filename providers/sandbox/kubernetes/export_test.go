package kubernetes

import "testing"

// Unserve makes the package name the agent-sandbox resources at version
// v of their groups, one the cluster does not serve: what a cluster
// without agent-sandbox (or without its extensions) answers for them is
// what it answers then. The names are restored when t ends; not for
// parallel tests.
func Unserve(t testing.TB, v string) {
	s, c, tm := sandboxes, sandboxClaims, sandboxTemplates
	sandboxes.Version, sandboxClaims.Version, sandboxTemplates.Version = v, v, v
	t.Cleanup(func() { sandboxes, sandboxClaims, sandboxTemplates = s, c, tm })
}
