// Package acpstar binds the ACP agent providers to Starlark: acp_agent()
// for any Agent Client Protocol executable, and the OpenCode, Codex,
// GitHub Copilot, GLM and Pi profiles (opencode_agent(), codex_agent(),
// copilot_agent(), glm_agent(), pi_agent()).
//
// They live outside package starlib because the ACP engine brings the ACP
// and MCP SDKs with it: an embedder that only evaluates workflows with
// deterministic or local providers does not link them. Add Extension to
// starlib.LoadOptions.Extensions (the aml command does) to make the
// factories available:
//
//	w, err := starlib.LoadFile("review.star", starlib.LoadOptions{Extensions: []*starlib.Extension{acpstar.Extension}})
package acpstar
