package eval

import (
	"encoding/json"
	"testing"
)

// TestPlainText checks the decoder-free reading of recorded texts
// against encoding/json: it reads what needs no unescaping, and leaves
// everything else to the decoder.
func TestPlainText(t *testing.T) {
	for _, c := range []struct {
		in   string
		fast bool
	}{
		{`{"text":"hello"}`, true},
		{`{"text":""}`, true},
		{`{"text":"héllo ✓"}`, true},
		{`{"text":"a\nb"}`, false},
		{`{"text":"say \"hi\""}`, false},
		{`{"text":"tab\there"}`, false},
		{`{"text":"x","turns":[]}`, false},
		{`{"structured":{"a":1}}`, false},
		{`{"text":"x"`, false},
	} {
		got, ok := plainText([]byte(c.in))
		if ok != c.fast {
			t.Errorf("plainText(%s): ok = %v, want %v", c.in, ok, c.fast)
			continue
		}
		if !ok {
			continue
		}
		var want struct{ Text string }
		if err := json.Unmarshal([]byte(c.in), &want); err != nil || got != want.Text {
			t.Errorf("plainText(%s) = %q; encoding/json reads %q (%v)", c.in, got, want.Text, err)
		}
	}
}

// TestIndexOrders checks the index's ordinals: the greatest ordinal at
// each context's level, fan-out contexts left out, and the effect at
// each ordinal.
func TestIndexOrders(t *testing.T) {
	recs := []*Effect{
		{ID: "agent#0", Kind: "agent", Order: "0"},
		{ID: "c#0/script#0", Kind: "script", Order: "1.0"},
		{ID: "c#0/p#0/2/agent#1", Kind: "agent", Order: "1.3.2.4"},
		{ID: "read:env:HOME#0", Kind: "read"},
		{ID: "agent#1", Kind: "agent", Order: "2"},
		{ID: "agent#1", Kind: VoidKind},
	}
	ix := buildIndex(recs)
	ix.orders()
	want := map[string]int32{"": 1, "c#0": 3, "c#0/p#0/2": 4}
	if len(ix.after) != len(want) {
		t.Fatalf("after = %v, want %v", ix.after, want)
	}
	for k, v := range want {
		if ix.after[k] != v {
			t.Errorf("after[%q] = %d, want %d", k, ix.after[k], v)
		}
	}
	if e := ix.at[atKey{"c#0/p#0/2", 4}]; e == nil || e.ID != "c#0/p#0/2/agent#1" {
		t.Errorf("at[c#0/p#0/2, 4] = %v", e)
	}
	if e := ix.at[atKey{"", 0}]; e == nil || e.ID != "agent#0" {
		t.Errorf("at[root, 0] = %v", e)
	}
	if _, ok := ix.byID["agent#1"]; ok {
		t.Error("a withdrawn record is indexed")
	}
}
