package daytona

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aml-go/aml/providers/sandbox/remote"
)

// quote makes s one word of the POSIX shell, whatever it holds: it is
// single-quoted, and each single quote in it is written as
//
//	'\''
//
// (end the quote, an escaped quote, quote again). Inside single quotes
// nothing is special: not $, `, \, " or a newline.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellName reports whether k can be exported by the shell.
func shellName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// words writes shell words. A word that is not valid UTF-8 cannot cross
// the API (its JSON string would be mangled): it is rebuilt in the guest
// from octal escapes into a variable, in a prelude, and referred to.
type words struct {
	prelude []string
}

func (w *words) word(s string) string {
	if utf8.ValidString(s) {
		return quote(s)
	}
	v := fmt.Sprintf("aml_w%d", len(w.prelude)+1)
	var esc strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&esc, "\\%03o", s[i])
	}
	// The x keeps trailing newlines from the command substitution.
	w.prelude = append(w.prelude, fmt.Sprintf("%s=$(printf '%sx') && %s=${%s%%x}", v, esc.String(), v, v))
	return `"$` + v + `"`
}

// script is the session command that runs c in dir: a shell text, since
// the session API takes one, that runs the literal argv with nothing
// re-interpreted.
//
// The argv runs in a subshell: it enters dir, exports the environment and
// execs argv[0] (found on PATH when it has no slash, status 127 when not
// found). Its standard input is empty (/dev/null) unless c.Stdin is set;
// then it is a FIFO fed by a decoder reading the session's input: each
// line base64 of one chunk, a line "." the end of input (see stdinWriter).
// The session's input only ends when the command does, so its own EOF
// cannot be used, and the API appends a newline to input that lacks one.
//
// After the argv exits, mark and a newline are printed to stdout and to
// stderr. The daemon labels output line by line and gives a last partial
// line a newline; with the mark, each stream's last line ends with mark
// and a newline, and what precedes them is exactly what the process wrote
// (the reader strips them). The script's status is the argv's: 128+n
// when signal n ended it, as the shell reports.
func script(c remote.Command, dir, mark string) (string, error) {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return "", errors.New("empty command")
	}
	for _, a := range c.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return "", errors.New("an argument contains a NUL byte")
		}
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", errors.New("the directory contains a NUL byte")
	}
	var w words
	var b strings.Builder
	b.WriteString("cd -- " + w.word(dir))
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var envArgs []string
	for _, k := range keys {
		v := c.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return "", fmt.Errorf("the environment variable %q is invalid", k)
		}
		if shellName(k) {
			b.WriteString(" && export " + k + "=" + w.word(v))
		} else {
			envArgs = append(envArgs, w.word(k+"=")+w.word(v))
		}
	}
	b.WriteString(" && exec ")
	if len(envArgs) > 0 {
		// env takes NAME=VALUE words until the command; a command whose
		// name holds = would be taken for one.
		if strings.Contains(c.Args[0], "=") {
			return "", fmt.Errorf("the command %q contains = and the environment has names the shell cannot export", c.Args[0])
		}
		b.WriteString("env " + strings.Join(envArgs, " ") + " ")
	}
	for i, a := range c.Args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.word(a))
	}
	run := b.String()
	if len(w.prelude) > 0 {
		run = strings.Join(w.prelude, " && ") + " && " + run
	}
	trailer := fmt.Sprintf("printf '%%s\\n' %s; printf '%%s\\n' %s >&2; exit \"$s\"", quote(mark), quote(mark))
	if !c.Stdin {
		return fmt.Sprintf("( ( %s ) </dev/null; s=$?; %s )", run, trailer), nil
	}
	return fmt.Sprintf(`(
exec 3<&0
d=$(mktemp -d) && mkfifo "$d/in" || exit 125
( while IFS= read -r l && [ "$l" != . ]; do printf %%s "$l" | base64 -d || exit 1; done ) <&3 >"$d/in" 3<&- &
f=$!
( %s ) <"$d/in" 3<&-
s=$?
kill "$f" 2>/dev/null
rm -rf "$d"
%s
)`, run, trailer), nil
}
