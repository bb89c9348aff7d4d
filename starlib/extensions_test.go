package starlib_test

import (
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/fsstar"
)

// allExtensions are the extensions the aml command links: the golden
// cases and examples use their factories.
var allExtensions = []*starlib.Extension{acpstar.Extension, fsstar.Extension}
