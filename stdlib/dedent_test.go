package stdlib

import (
	"strings"
	"testing"
)

func TestDedent(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"triple quoted", "\n    a\n      b\n    ", "a\n  b"},
		{"triple quoted closing at column 0", "\n    a\n      b\n", "a\n  b"},
		{"only one trailing line removed", "\n    a\n      b\n    \n", "a\n  b\n"},
		{"only one leading line removed", "\n\n    a\n", "\na"},
		{"single line", "    a", "a"},
		{"single line without indentation", "a", "a"},
		{"single blank line", "   ", ""},
		{"single tab line", "\t", ""},
		{"one line break", "\n", ""},
		{"two line breaks", "\n\n", ""},
		{"three line breaks", "\n\n\n", "\n"},
		{"only blank lines", " \n\t\n  \n ", "\n"},
		{"no trailing newline", "  a\n    b", "a\n  b"},
		{"trailing newline", "  a\n    b\n", "a\n  b"},
		{"first line not blank and not indented", "a\n  b\n", "a\n  b"},
		{"first line indented", "  x\n    y", "x\n  y"},
		{"blank first line with spaces", "   \n  x", "x"},
		{"deeper first line", "\n      deep\n    shallow\n", "  deep\nshallow"},
		{"inner blank lines", "  a\n\n    \n  b", "a\n\n\nb"},
		{"blank line shorter than indentation", "    a\n  \n    b", "a\n\nb"},
		{"already dedented", "a\nb", "a\nb"},
		{"tab versus spaces", "\ta\n    b", "\ta\n    b"},
		{"tab versus space prefix", "\t  a\n  \tb", "\t  a\n  \tb"},
		{"common tab then space", "\t  a\n\t b", " a\nb"},
		{"common space differs after", "  \ta\n \t b", " \ta\n\t b"},
		{"tabs only", "\t\ta\n\tb", "\ta\nb"},
		{"spaces inside lines kept", "  a  b\n  c   d", "a  b\nc   d"},
		{"crlf triple quoted", "\r\n    a\r\n      b\r\n    ", "a\n  b"},
		{"crlf trailing", "  a\r\n  b\r\n", "a\nb"},
		{"crlf blank inner line", "  a\r\n\r\n  b", "a\n\nb"},
		{"crlf only", "\r\n", ""},
		{"lone carriage return is content", "  a\r  b", "a\r  b"},
		{"carriage return at end of text", "  a\n  b\r", "a\nb\r"},
		{"carriage return is not blank", "\r", "\r"},
		{"double carriage return", "  a\r\r\n  b", "a\r\nb"},
		{"non-ascii", "  é\n  ü\n", "é\nü"},
		{"non-breaking space is not indentation", "\u00a0a\n b", "\u00a0a\n b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Dedent(tt.in); got != tt.want {
				t.Errorf("Dedent(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDedentUnchangedDoesNotAllocate(t *testing.T) {
	s := "a\n  b\nc"
	allocs := testing.AllocsPerRun(100, func() {
		if Dedent(s) != s {
			t.Fatal("Dedent changed an already dedented string")
		}
	})
	if allocs != 0 {
		t.Errorf("Dedent of an unchanged string made %v allocations, want 0", allocs)
	}
}

func FuzzDedent(f *testing.F) {
	for _, s := range []string{
		"",
		"\n    a\n      b\n    ",
		"\t  a\n\t b\n",
		"  a\r\n\r\n  b\r\n",
		"  a\r\r\n  b\r",
		" \n \n \n ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Dedent(in)
		if len(out) > len(in) {
			t.Fatalf("Dedent(%q) = %q is longer than its input", in, out)
		}
		if !isSubsequence(out, in) {
			t.Fatalf("Dedent(%q) = %q is not a subsequence of its input", in, out)
		}
		inLines := strings.Split(in, "\n")
		outLines := strings.Split(out, "\n")
		if out != "" && len(outLines) > len(inLines) {
			t.Fatalf("Dedent(%q) = %q has more lines than its input", in, out)
		}
		for _, ol := range outLines {
			if !isSuffixOfSomeLine(ol, inLines) {
				t.Fatalf("Dedent(%q): output line %q is not a suffix of an input line", in, ol)
			}
		}
		// No indentation is common to all non-blank output lines.
		haveCommon := false
		var common string
		for _, ol := range outLines {
			if isBlank(ol) {
				if ol != "" {
					t.Fatalf("Dedent(%q): blank output line %q is not empty", in, ol)
				}
				continue
			}
			ind := indentation(ol)
			if !haveCommon {
				common, haveCommon = ind, true
			} else {
				common = commonPrefix(common, ind)
			}
		}
		if common != "" {
			t.Fatalf("Dedent(%q) = %q keeps common indentation %q", in, out, common)
		}
	})
}

// isSubsequence reports whether the bytes of sub occur in s in order.
func isSubsequence(sub, s string) bool {
	i := 0
	for j := 0; i < len(sub) && j < len(s); j++ {
		if sub[i] == s[j] {
			i++
		}
	}
	return i == len(sub)
}

// isSuffixOfSomeLine reports whether line is a suffix of one of lines,
// with or without that line's final "\r".
func isSuffixOfSomeLine(line string, lines []string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, line) || strings.HasSuffix(strings.TrimSuffix(l, "\r"), line) {
			return true
		}
	}
	return false
}

func BenchmarkDedent(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("\n")
	for i := range 50 {
		sb.WriteString("        ")
		sb.WriteString(strings.Repeat("  ", i%4))
		sb.WriteString("step: run the build and report the result\n")
		if i%10 == 9 {
			sb.WriteString("\n")
		}
	}
	sb.WriteString("        ")
	s := sb.String()
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		Dedent(s)
	}
}
