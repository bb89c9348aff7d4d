// Package jsonstr appends strings to a buffer as JSON strings, for the
// code that writes JSON by hand (the journal's effect records, the report
// page's data): without reflection, allocating only to grow the
// destination. It imports no other package of this module, so that eval
// may use it.
package jsonstr

import "unicode/utf8"

// Append appends s to b as a JSON string, byte for byte as
// encoding/json encodes it with HTML escaping off (Encoder.SetEscapeHTML
// false): '"' and '\\' are escaped, control characters become \b, \f,
// \n, \r, \t or \u00XX, each byte of invalid UTF-8 becomes \ufffd, and
// U+2028 and U+2029 become \u2028 and \u2029. It is safe for concurrent
// use.
func Append(b []byte, s string) []byte { return appendString(b, s, &plainEscapes) }

// AppendScript appends s to b as a JSON string that may sit in an HTML
// script element: as Append, but '<', '>' and '&' become
// \u003c, \u003e and \u0026 (so no "</script" or "<!--" appears), '/'
// becomes "\/" (so no URL appears literally), and every control character
// other than \n, \r and \t becomes \u00XX. It is safe for concurrent use.
func AppendScript(b []byte, s string) []byte { return appendString(b, s, &scriptEscapes) }

// A jsonEscapes table says, for each ASCII byte, how it is written: 0 as
// itself, 'u' as \u00XX, any other byte c as a backslash and c.
type jsonEscapes [utf8.RuneSelf]byte

var plainEscapes, scriptEscapes = func() (p, s jsonEscapes) {
	for c := range 0x20 {
		p[c], s[c] = 'u', 'u'
	}
	p['"'], p['\\'] = '"', '\\'
	p['\n'], p['\r'], p['\t'], p['\b'], p['\f'] = 'n', 'r', 't', 'b', 'f'
	s['"'], s['\\'], s['/'] = '"', '\\', '/'
	s['\n'], s['\r'], s['\t'] = 'n', 'r', 't'
	s['<'], s['>'], s['&'] = 'u', 'u', 'u'
	return p, s
}()

const hexDigits = "0123456789abcdef"

// appendString appends s to b quoted as esc says.
func appendString(b []byte, s string, esc *jsonEscapes) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			e := esc[c]
			if e == 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if e == 'u' {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				b = append(b, '\\', e)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
