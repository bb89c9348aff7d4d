package stdlib

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

var textModule = &moduleDef{
	name: "@std/text",
	doc: `Text formatting helpers. The module's functions are globals of their own: ` +
		`load("@std/text", "dedent", "indent", "wrap", "lines"). ` +
		`Lines are separated by "\n"; a "\r" before "\n" is treated as part of the line break.`,
	members: []memberDef{
		{Member{"dedent", "dedent(s)",
			`Returns s with its common indentation removed, by the same rule as the rest of AML: ` +
				`a blank first line and a blank last line are dropped, then the spaces and tabs that ` +
				`prefix every non-blank line (compared literally, so a tab never matches a space) are ` +
				`removed; deeper indentation is kept and inner blank lines become empty. ` +
				`"\r\n" line breaks become "\n".`}, textDedent},
		{Member{"indent", "indent(s, prefix)",
			`Returns s with prefix inserted at the start of every line that contains a character ` +
				`other than spaces and tabs; blank lines and all line breaks are left as they are, so ` +
				`a trailing "\n" does not produce a prefixed empty line.`}, textIndent},
		{Member{"wrap", "wrap(s, width)",
			`Fills the text of s into lines of at most width characters (Unicode code points) by ` +
				`greedy word wrapping. Paragraphs are separated by one or more blank lines in s and by ` +
				`exactly one empty line in the result; within a paragraph, line breaks and runs of ` +
				`white space are collapsed to single spaces and leading indentation is not kept. ` +
				`A word longer than width is put on a line of its own and is not broken. The result ` +
				`has no trailing line break; width must be at least 1.`}, textWrap},
		{Member{"lines", "lines(s)",
			`Returns the list of lines of s without their "\n" or "\r\n" terminators. A final line ` +
				`break does not start another line, so lines("a\nb\n") is ["a", "b"] and lines("") is [].`}, textLines},
	},
}

func textDedent(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s); err != nil {
		return nil, err
	}
	return starlark.String(Dedent(s)), nil
}

func textIndent(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s, prefix string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s, "prefix", &prefix); err != nil {
		return nil, err
	}
	return starlark.String(indentText(s, prefix)), nil
}

func textWrap(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	var width int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s, "width", &width); err != nil {
		return nil, err
	}
	if width < 1 {
		return nil, fmt.Errorf("%s: width must be at least 1, got %d", b.Name(), width)
	}
	return starlark.String(wrapText(s, width)), nil
}

func textLines(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s); err != nil {
		return nil, err
	}
	lines := splitLines(s)
	elems := make([]starlark.Value, len(lines))
	for i, line := range lines {
		elems[i] = starlark.String(line)
	}
	return starlark.NewList(elems), nil
}

// indentText inserts prefix before every non-blank line of s.
func indentText(s, prefix string) string {
	if prefix == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(prefix)*(strings.Count(s, "\n")+1))
	for rest, more := s, true; more; {
		var line string
		line, rest, more = strings.Cut(rest, "\n")
		if !isBlank(strings.TrimSuffix(line, "\r")) {
			b.WriteString(prefix)
		}
		b.WriteString(line)
		if more {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// wrapText fills the paragraphs of s greedily into lines of at most width
// code points.
func wrapText(s string, width int) string {
	var b strings.Builder
	b.Grow(len(s))
	var words []string
	flush := func() {
		if len(words) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		col := 0
		for i, w := range words {
			n := utf8.RuneCountInString(w)
			switch {
			case i == 0:
			case col+1+n <= width:
				b.WriteByte(' ')
				col++
			default:
				b.WriteByte('\n')
				col = 0
			}
			b.WriteString(w)
			col += n
		}
		words = words[:0]
	}
	for _, line := range splitLines(s) {
		if isBlank(line) {
			flush()
			continue
		}
		words = append(words, strings.Fields(line)...)
	}
	flush()
	return b.String()
}

// splitLines splits s into lines without their "\n" or "\r\n"
// terminators. A final terminator does not start another line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	body, terminated := strings.CutSuffix(s, "\n")
	lines := strings.Split(body, "\n")
	last := len(lines) - 1
	for i, line := range lines {
		if i < last || terminated {
			lines[i] = strings.TrimSuffix(line, "\r")
		}
	}
	return lines
}
