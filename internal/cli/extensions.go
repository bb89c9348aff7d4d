package cli

import (
	"sync"

	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/fsstar"
)

// extensions are the provider families the aml command links beyond the
// core of starlib: every workflow it runs, tests or documents has them.
// The ACP agents get this executable as their stdio relay to the tool
// bridge (aml mcp-relay) and its version. The services' families
// (Docker, S3, Daytona, Modal) come from the build's services.Set; a
// build without them has stand-ins that only name them (see
// companion.go).
var extensions = sync.OnceValue(func() []*starlib.Extension {
	exts := []*starlib.Extension{
		acpstar.New(acpstar.Options{Relay: relayCommand(), ClientVersion: amlVersion()}),
		fsstar.Extension,
	}
	if !linked.Linked() {
		return append(exts, standIns())
	}
	return append(exts, linked.Extensions(services.ExtensionOptions{Relay: relayCommand()[0], Leftovers: runLeftovers.containers})...)
})
