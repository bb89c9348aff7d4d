package vulngate

import (
	"strings"
	"testing"
)

// stream is govulncheck -format json output as it is written: one
// message per value, a finding first at module level and then again at
// package level.
const stream = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck"}}
{"osv":{"id":"GO-1","summary":"A module bug"}}
{"osv":{"id":"GO-2","summary":"A standard library bug"}}
{"osv":{"id":"GO-3","summary":"Unfixed"}}
{"osv":{"id":"GO-4","summary":"Required, not imported"}}
{"finding":{"osv":"GO-1","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.1.0"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.1.0","package":"example.com/m/p"}]}}
{"finding":{"osv":"GO-2","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http"}]}}
{"finding":{"osv":"GO-3","trace":[{"module":"example.com/d","version":"v28.5.2+incompatible","package":"example.com/d/c"}]}}
{"finding":{"osv":"GO-4","fixed_version":"v0.62.0","trace":[{"module":"golang.org/x/net","version":"v0.61.0"}]}}
`

func TestRead(t *testing.T) {
	fs, err := Read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		fails bool
		says  string
	}{
		"GO-1": {true, "GO-1 in example.com/m/p (example.com/m@v1.1.0): fixed in v1.2.0: go get example.com/m@v1.2.0 (A module bug)"},
		"GO-2": {false, "GO-2 in net/http (stdlib@v1.26.8): fixed in Go 1.26.9: build with that toolchain or newer (A standard library bug)"},
		"GO-3": {false, "GO-3 in example.com/d/c (example.com/d@v28.5.2+incompatible): no fixed version yet (Unfixed)"},
		"GO-4": {false, "GO-4 in golang.org/x/net@v0.61.0: fixed in v0.62.0: go get golang.org/x/net@v0.62.0 (Required, not imported)"},
	}
	if len(fs) != len(want) {
		t.Fatalf("%d findings, want %d: %v", len(fs), len(want), fs)
	}
	for _, f := range fs {
		w, ok := want[f.ID]
		if !ok {
			t.Errorf("unexpected finding %v", f)
			continue
		}
		if f.Fails() != w.fails || f.String() != w.says {
			t.Errorf("%s: fails %v, %q; want %v, %q", f.ID, f.Fails(), f.String(), w.fails, w.says)
		}
	}
}

func TestReadBadInput(t *testing.T) {
	if _, err := Read(strings.NewReader(`{"finding":`)); err == nil || !strings.Contains(err.Error(), "govulncheck") {
		t.Fatalf("truncated input: %v, want an error naming govulncheck's output", err)
	}
}
