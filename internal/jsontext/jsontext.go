// Package jsontext appends Go strings to a buffer as JSON string literals,
// without reflection or allocation. It is the one string encoder of the
// project's hand-written JSON writers: the evaluator's result encoding and
// the run report's embedded data.
//
// Both functions escape as encoding/json does: control characters,
// quote and backslash, U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
// They are pure and safe for concurrent use.
package jsontext

import "unicode/utf8"

const hex = "0123456789abcdef"

// escape tables: true for an ASCII byte that must be escaped.
var (
	plain  [utf8.RuneSelf]bool // encoding/json with HTML escaping off
	script [utf8.RuneSelf]bool // plain, and < > & / for an HTML script element
)

func init() {
	for c := range utf8.RuneSelf {
		plain[c] = c < 0x20 || c == '"' || c == '\\'
		script[c] = plain[c] || c == '<' || c == '>' || c == '&' || c == '/'
	}
}

// AppendString appends s to b as a JSON string, escaped as encoding/json
// escapes it with HTML escaping off.
func AppendString(b []byte, s string) []byte { return appendString(b, s, &plain) }

// AppendScriptString appends s to b as a JSON string that can stand inside
// an HTML <script> element: besides what AppendString escapes, "<", ">"
// and "&" become \u003c, \u003e and \u0026, and "/" becomes "\/", so no
// "</script>" or "<!--" can appear in the output.
func AppendScriptString(b []byte, s string) []byte { return appendString(b, s, &script) }

func appendString(b []byte, s string, esc *[utf8.RuneSelf]bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !esc[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\', '/':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
