package starlib_test

import (
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/dockerstar"
	"github.com/aml-go/aml/starlib/fsstar"
	"github.com/aml-go/aml/starlib/remotestar"
	"github.com/aml-go/aml/starlib/s3star"
)

// allExtensions are the extensions the aml command links: the golden
// cases and examples use their factories.
var allExtensions = []*starlib.Extension{acpstar.Extension, fsstar.Extension, dockerstar.Extension, s3star.Extension, remotestar.Extension}
