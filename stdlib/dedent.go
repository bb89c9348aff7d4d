package stdlib

import "strings"

// Dedent removes the indentation common to the lines of s. It is the one
// dedent rule of AML: the @std/text function dedent and multiline block
// formatting both use it. Dedent is safe for concurrent use.
//
// The exact rule:
//
//  1. Lines. s is split at every "\n" into lines; a line that was followed
//     by "\n" and ends in "\r" loses that "\r", so "\r\n" also ends a line.
//     A string of n line breaks therefore has n+1 lines, the last of which
//     is empty when s ends in a line break. The output joins lines with
//     "\n" only.
//  2. Blank lines. A line is blank if it consists only of spaces and tabs
//     (the empty line is blank).
//  3. Outer blank lines. If the first line is blank it is removed. Then, if
//     the last of the remaining lines is blank, it is removed as well.
//     At most one line is removed at each end, together with the line
//     break that separated it from the rest. For a triple-quoted string
//     such as "\n    a\n      b\n    " this drops the empty line after the
//     opening quotes and the indentation before the closing quotes, giving
//     "a\n  b".
//  4. Common indentation. The indentation of a line is its longest prefix
//     of spaces and tabs. The common indentation is the longest string
//     that is a prefix of the indentation of every non-blank line that
//     remains; it is compared byte by byte, so a tab and a space never
//     match each other. The common indentation is removed from every
//     non-blank line; indentation beyond it is preserved.
//  5. Inner blank lines are kept, as empty lines.
//
// The empty string stays empty. A string made only of n blank lines
// becomes n-3 line breaks if n >= 3 (its inner blank lines, emptied) and
// "" otherwise. The output is never longer than s.
func Dedent(s string) string {
	body, lastTerminated := trimOuterBlankLines(s)

	// First pass: common indentation, and whether anything changes.
	var common string
	haveCommon := false
	changed := false
	for rest, more := body, true; more; {
		var line string
		line, rest, more = nextLine(rest, lastTerminated)
		ind := indentation(line)
		if len(ind) == len(line) {
			if line != "" {
				changed = true // a blank line with content becomes empty
			}
			continue
		}
		if !haveCommon {
			common, haveCommon = ind, true
		} else {
			common = commonPrefix(common, ind)
		}
	}
	if common != "" {
		changed = true
	}
	if !changed && !hasTerminatedCR(body, lastTerminated) {
		return body
	}

	// Second pass: write the result.
	var b strings.Builder
	b.Grow(len(body))
	first := true
	for rest, more := body, true; more; {
		var line string
		line, rest, more = nextLine(rest, lastTerminated)
		if !first {
			b.WriteByte('\n')
		}
		first = false
		if isBlank(line) {
			continue
		}
		b.WriteString(line[len(common):])
	}
	return b.String()
}

// trimOuterBlankLines removes a blank first line and a blank last line
// from s, each with its separating line break. It reports whether the last
// line of the returned string was followed by a line break in s.
func trimOuterBlankLines(s string) (body string, lastTerminated bool) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		if isBlank(s) {
			return "", false
		}
		return s, false
	}
	lo, hi := 0, len(s)
	if isBlank(strings.TrimSuffix(s[:i], "\r")) {
		lo = i + 1
	}
	j := strings.LastIndexByte(s, '\n')
	if lo > j {
		// After removing the first line a single line remains: s[lo:].
		if isBlank(s[lo:]) {
			return "", false
		}
		return s[lo:], false
	}
	if isBlank(s[j+1:]) {
		hi = j
		lastTerminated = true
	}
	return s[lo:hi], lastTerminated
}

// nextLine returns the first line of s without its terminator, and the
// remainder after the terminator. more is false when the returned line is
// the last one. A "\r" before "\n" is stripped; a "\r" at the end of the
// last line is stripped only if lastTerminated is set.
func nextLine(s string, lastTerminated bool) (line, rest string, more bool) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		if lastTerminated {
			s = strings.TrimSuffix(s, "\r")
		}
		return s, "", false
	}
	return strings.TrimSuffix(s[:i], "\r"), s[i+1:], true
}

// hasTerminatedCR reports whether some line of body is terminated by
// "\r\n" in the original input.
func hasTerminatedCR(body string, lastTerminated bool) bool {
	if strings.Contains(body, "\r\n") {
		return true
	}
	return lastTerminated && strings.HasSuffix(body, "\r")
}

// indentation returns the longest prefix of line made of spaces and tabs.
func indentation(line string) string {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[:i]
}

// isBlank reports whether line consists only of spaces and tabs.
func isBlank(line string) bool {
	return len(indentation(line)) == len(line)
}

// commonPrefix returns the longest common prefix of a and b.
func commonPrefix(a, b string) string {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return a[:i]
}
