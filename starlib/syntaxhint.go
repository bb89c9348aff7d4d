package starlib

import (
	"fmt"
	"unicode/utf8"

	"go.starlark.net/syntax"
)

// ExplainSyntax returns se with its message naming the bracket that
// caused it when one was opened before the error and never closed in
// src: the parser notices a missing ")" only where the file (or the
// indentation) ends, lines away from the "(" that is open, so the
// message says where that is ("got outdent, want ','; the ( at 2:17 is
// never closed"). The runtime, aml check, aml fmt and the editor all
// report syntax errors through it, with the same words. src is the
// file's text (a string or a []byte).
func ExplainSyntax(se syntax.Error, src any) syntax.Error {
	var text string
	switch s := src.(type) {
	case string:
		text = s
	case []byte:
		text = string(s)
	default:
		return se
	}
	open, ok := lastUnclosed(text, se.Pos)
	if !ok {
		return se
	}
	se.Msg = fmt.Sprintf("%s; the %c at %d:%d is never closed", se.Msg, open.ch, open.line, open.col)
	return se
}

// bracket is an opening bracket and where it is (1-based line, column in
// runes).
type bracket struct {
	ch        rune
	line, col int32
}

// lastUnclosed returns the last bracket of text that opens before pos
// and is never closed. Brackets inside strings and comments do not
// count; a closing bracket closes the innermost open one whatever its
// kind.
func lastUnclosed(text string, pos syntax.Position) (bracket, bool) {
	var stack []bracket
	line, col := int32(1), int32(1)
	quote, triple := rune(0), false
	comment := false
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		at := bracket{ch: r, line: line, col: col}
		advance := func(k int) {
			for ; k > 0 && i < len(text); k-- {
				c, m := utf8.DecodeRuneInString(text[i:])
				i += m
				if c == '\n' {
					line, col = line+1, 1
				} else {
					col++
				}
			}
		}
		switch {
		case comment:
			if r == '\n' {
				comment = false
			}
			advance(1)
		case quote != 0:
			switch {
			case r == '\\':
				advance(2)
			case r == quote && triple && len(text)-i >= 3 && text[i+1] == byte(quote) && text[i+2] == byte(quote):
				quote = 0
				advance(3)
			case r == quote && !triple:
				quote = 0
				advance(1)
			case r == '\n' && !triple:
				quote = 0 // an unterminated string ends with its line
				advance(1)
			default:
				advance(1)
			}
		case r == '#':
			comment = true
			advance(1)
		case r == '"' || r == '\'':
			quote = r
			if len(text)-i >= 3 && text[i+1] == byte(r) && text[i+2] == byte(r) {
				triple = true
				advance(3)
			} else {
				triple = false
				advance(1)
			}
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, at)
			advance(1)
		case r == ')' || r == ']' || r == '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			advance(1)
		default:
			i += n
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
	}
	for j := len(stack) - 1; j >= 0; j-- {
		b := stack[j]
		if b.line < pos.Line || b.line == pos.Line && b.col < pos.Col {
			return b, true
		}
	}
	return bracket{}, false
}
