package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonSamples are strings that exercise every escaping choice.
var jsonSamples = []string{
	"",
	"plain text",
	`"quoted" and \back\slashed`,
	"<script>alert(1)</script> & <!-- -->",
	"http://example.com/a/b?c=d&e=f",
	"\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f",
	"line\u2028separator\u2029paragraph",
	"héllo wörld ✓ 日本語 🙂",
	"\xff", "a\xffb", "\xc3", "\xc3(", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"\xef\xbf\xbd", "\u2027\u202a",
	strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 100),
}

// reference encodes s with encoding/json, with or without HTML escaping.
func jsonReference(t testing.TB, s string, html bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// check compares both functions on s against encoding/json.
func checkJSONString(t testing.TB, s string) {
	t.Helper()
	if got, want := Append(nil, s), jsonReference(t, s, false); !bytes.Equal(got, want) {
		t.Errorf("Append(%q) = %s, encoding/json gives %s", s, got, want)
	}
	got := AppendScript(nil, s)
	// The script form differs from encoding/json's HTML-safe form only
	// in writing '/' as "\/" and \b, \f as \u0008, \u000c.
	norm := bytes.ReplaceAll(got, []byte(`\/`), []byte("/"))
	norm = bytes.ReplaceAll(norm, []byte(`\u0008`), []byte(`\b`))
	norm = bytes.ReplaceAll(norm, []byte(`\u000c`), []byte(`\f`))
	if want := jsonReference(t, s, true); !bytes.Equal(norm, want) {
		t.Errorf("AppendScript(%q) = %s, encoding/json gives %s", s, got, want)
	}
	if i := bytes.IndexAny(got, "<>&\b\f"); i >= 0 {
		t.Errorf("AppendScript(%q) = %s holds %q", s, got, got[i])
	}
	for i, c := range got {
		if c == '/' && got[i-1] != '\\' {
			t.Errorf("AppendScript(%q) = %s holds a '/' not escaped", s, got)
		}
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil || back != validEach(s) {
		t.Errorf("AppendScript(%q) = %s decodes to %q, %v", s, got, back, err)
	}
}

// validEach replaces each byte of invalid UTF-8 in s by U+FFFD, as
// encoding/json does.
func validEach(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func TestAppend(t *testing.T) {
	for _, s := range jsonSamples {
		checkJSONString(t, s)
	}
	for c := range utf8.RuneSelf {
		checkJSONString(t, "a"+string(rune(c))+"b")
	}
	if got := Append([]byte("x:"), "y"); string(got) != `x:"y"` {
		t.Errorf("appending to a prefix: %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkJSONString(t, s) })
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("a journal record's text, with \"quotes\" and a newline\n", 4)
	var buf []byte
	for b.Loop() {
		buf = Append(buf[:0], s)
	}
}
