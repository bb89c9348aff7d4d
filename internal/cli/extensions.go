package cli

import (
	"sync"

	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/dockerstar"
	"github.com/aml-go/aml/starlib/fsstar"
	"github.com/aml-go/aml/starlib/remotestar"
	"github.com/aml-go/aml/starlib/s3star"
)

// extensions are the provider families the aml command links beyond the
// core of starlib: every workflow it runs, tests or documents has them.
// The ACP agents get this executable as their stdio relay to the tool
// bridge (aml mcp-relay) and its version.
var extensions = sync.OnceValue(func() []*starlib.Extension {
	return []*starlib.Extension{
		acpstar.New(acpstar.Options{Relay: relayCommand(), ClientVersion: amlVersion()}),
		fsstar.Extension,
		s3star.Extension,
		// Agents in Docker sandboxes reach their tools through this
		// executable's mcp-relay, mounted into the container.
		// Containers that killed aml processes left are reported to the
		// run going on.
		dockerstar.New(dockerstar.Options{Relay: relayCommand()[0], Leftovers: runLeftovers.containers}),
		// Remote sandboxes (Daytona, Modal) run the aml of their image.
		remotestar.Extension,
	}
})
