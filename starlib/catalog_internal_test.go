package starlib

import (
	"strings"
	"testing"
)

// TestCatalogIsComplete checks every builtin documents itself and uses only
// known parameter types, so a typo cannot make a parameter reject every
// value.
func TestCatalogIsComplete(t *testing.T) {
	for _, b := range Catalog() {
		if b.Doc == "" || b.Returns == "" || b.Example == "" || b.Group == "" {
			t.Errorf("%s: missing doc, returns, example or group", b.Name)
		}
		if b.Impl == nil && b.raw == nil {
			t.Errorf("%s: no implementation", b.Name)
		}
		for _, p := range b.Params {
			if p.Doc == "" {
				t.Errorf("%s(%s): parameter without doc", b.Name, p.Name)
			}
			for _, k := range p.Keys {
				if k.Doc == "" {
					t.Errorf("%s(%s): key %q without doc", b.Name, p.Name, k.Name)
				}
			}
			for _, typ := range strings.Split(p.Type, " | ") {
				if _, ok := paramTypes[typ]; !ok {
					t.Errorf("%s(%s): unknown type %q", b.Name, p.Name, typ)
				}
			}
		}
	}
}
