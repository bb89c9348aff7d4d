package cli

import (
	"strings"
	"testing"
)

// TestDocIndexEntriesResolve: every name the index of aml doc lists has a
// reference of its own.
func TestDocIndexEntriesResolve(t *testing.T) {
	var index, errs strings.Builder
	if code := Main([]string{"doc"}, nil, &index, &errs); code != exitOK {
		t.Fatalf("aml doc: exit %d: %s", code, errs.String())
	}
	n := 0
	for _, line := range strings.Split(index.String(), "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		name := strings.Fields(line)[0]
		n++
		var out, stderr strings.Builder
		if code := Main([]string{"doc", name}, nil, &out, &stderr); code != exitOK || out.Len() == 0 {
			t.Errorf("aml doc %s: exit %d, %q", name, code, stderr.String())
		}
	}
	if n < 40 {
		t.Fatalf("only %d index entries found:\n%s", n, index.String())
	}
}
