// Command aml-full is aml with the clients of outside services linked:
// the Docker Engine (docker_sandbox(), aml sandbox prune), Modal,
// Daytona and Kubernetes (modal_sandbox(), daytona_sandbox(),
// kubernetes_sandbox()), S3 (s3_workspace(),
// s3:// stores) and Temporal (aml run --temporal, aml runs --temporal,
// aml worker, aml cancel, aml answer).
//
// Their SDKs cost tens of milliseconds at every start, so aml leaves
// them out and runs aml-full in its place, with the same arguments,
// when an invocation needs one of them; users run aml. It takes the
// commands and flags of aml (see the documentation of cmd/aml and
// docs/reference/cli.md). go install github.com/aml-go/aml/cmd/...
// installs both, and a release archive holds both.
package main

import (
	"os"

	"github.com/aml-go/aml/internal/cli"
	"github.com/aml-go/aml/internal/services/full"
)

// version is set at build time with -ldflags "-X main.version=..." (the
// release build sets it to the tag).
var version = ""

func main() {
	os.Exit(cli.Run(cli.Build{Version: version, Services: full.Linked}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
