// Package pidline takes a command's process id off its stderr. The
// container and remote sandboxes start a command through Wrapper, so that
// the first line of its stderr is its process id, said before the command
// itself runs: the host learns the id from the command's own stream,
// never from a file the sandbox could replace, and kills its group by it
// (KillArgv, run by a second exec; Kill, the escalation the remote
// sandboxes share when that kill does not end the command).
package pidline

import (
	"bytes"
	"io"
	"strconv"
)

// Wrapper is the shell source a command runs under ("sh -c Wrapper NAME
// ARGV..."): it says its process id on stderr, then becomes the command.
const Wrapper = `echo $$ >&2 && exec "$@"`

// maxLine bounds the wrapper's line: a process id.
const maxLine = 20

// Writer passes what is written to Dst on, less the wrapper's first line,
// which it gives to Set. When the first bytes are not a line of at most 20
// bytes (the wrapper's comes first, so this does not happen), Set gets
// nil and nothing is taken off. A Writer is used by one goroutine.
type Writer struct {
	Dst  io.Writer
	Set  func(line []byte)
	buf  []byte
	done bool
}

// Write passes b on, less the wrapper's line; it reports len(b) written
// unless Dst fails.
func (w *Writer) Write(b []byte) (int, error) {
	n := len(b)
	if !w.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 && len(w.buf)+len(b) <= maxLine {
			w.buf = append(w.buf, b...)
			return n, nil
		}
		w.done = true
		if i >= 0 && len(w.buf)+i <= maxLine {
			w.Set(append(w.buf, b[:i]...))
			b = b[i+1:]
		} else {
			w.Set(nil)
			b = append(w.buf, b...)
		}
		w.buf = nil
	}
	if len(b) > 0 {
		if _, err := w.Dst.Write(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Parse returns the process id a line says, or 0 when it says none (or
// names init).
func Parse(line []byte) int64 {
	n, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil || n <= 1 {
		return 0
	}
	return n
}
