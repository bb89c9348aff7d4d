package main

import (
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/acpstar"
	"github.com/aml-go/aml/starlib/fsstar"
)

// extensions are the provider families the aml command links beyond the
// core of starlib: every workflow it runs, tests or documents has them.
var extensions = []*starlib.Extension{acpstar.Extension, fsstar.Extension}
