package cli

import (
	"bytes"
	"regexp"
	"sync"
)

// The helpers of the live view's tests through aml run (live_term_test.go).

// sgrRE matches an SGR (colour) sequence.
var sgrRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// The spinner's frames and colour, as the live view draws them.
var liveSpinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const (
	sgrReset = "\x1b[0m"
	sgrCyan  = "\x1b[36m"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
