package jsontext_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/jsontext"
)

// encodingJSON is what encoding/json writes for s.
func encodingJSON(t testing.TB, s string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

var samples = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "</script><!-- & >", "a/b", "é ü 日本", "\u2028\u2029",
	"bad \xff byte \xc3", "emoji 🙂",
}

// TestAppendStringMatchesEncodingJSON: with HTML escaping off, the bytes
// are exactly encoding/json's.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		if got, want := string(jsontext.AppendString([]byte("x"), s)), "x"+encodingJSON(t, s, false); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestAppendScriptString: the output decodes to s (with invalid UTF-8 as
// U+FFFD), matches encoding/json's HTML-safe form once "\/" is read as
// "/", and holds no byte that could end or comment a script element.
func TestAppendScriptString(t *testing.T) {
	for _, s := range samples {
		out := jsontext.AppendScriptString(nil, s)
		checkScript(t, s, out)
		if got, want := strings.ReplaceAll(string(out), `\/`, "/"), encodingJSON(t, s, true); got != want {
			t.Errorf("AppendScriptString(%q) = %s, want %s", s, got, want)
		}
	}
}

func checkScript(t testing.TB, s string, out []byte) {
	t.Helper()
	var back string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("%q: %s is not JSON: %v", s, out, err)
	}
	if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
		t.Errorf("%q: decodes to %q", s, back)
	}
	if bytes.ContainsAny(bytes.ReplaceAll(out, []byte(`\/`), nil), "<>&/\u2028\u2029") {
		t.Errorf("%q: %s is not safe in a script element", s, out)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(jsontext.AppendString(nil, s)), encodingJSON(t, s, false); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		out := jsontext.AppendScriptString(nil, s)
		if got, want := strings.ReplaceAll(string(out), `\/`, "/"), encodingJSON(t, s, true); got != want {
			t.Fatalf("AppendScriptString(%q) = %s, want %s", s, got, want)
		}
		if bytes.ContainsAny(out, "<>&") {
			t.Fatalf("%q: %s holds an HTML delimiter", s, out)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("a typical agent result, with \"quotes\" and a newline\n", 20)
	buf := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = jsontext.AppendString(buf[:0], s)
	}
}
