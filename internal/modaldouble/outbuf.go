package modaldouble

import (
	"context"
	"io"
	"os"
	"sync"
)

// outbuf is one output stream of an exec as the command router keeps it:
// every byte the process wrote, readable from any offset (the SDK resumes
// a broken stream at the offset it reached), on disk so that a large
// output costs no memory. Its methods are safe for concurrent use.
type outbuf struct {
	f *os.File

	mu     sync.Mutex
	size   int64
	closed bool
	// grew is closed (and replaced) whenever size or closed changes.
	grew chan struct{}
}

func newOutbuf(dir string) (*outbuf, error) {
	f, err := os.CreateTemp(dir, "out-")
	if err != nil {
		return nil, err
	}
	return &outbuf{f: f, grew: make(chan struct{})}, nil
}

// Write appends p.
func (b *outbuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	n, err := b.f.WriteAt(p, b.size)
	b.size += int64(n)
	b.signal()
	return n, err
}

// finish marks the end of the stream.
func (b *outbuf) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.signal()
	}
}

func (b *outbuf) signal() {
	close(b.grew)
	b.grew = make(chan struct{})
}

// readAt reads at most len(p) bytes at off, waiting for them while the
// stream goes on; io.EOF at the end of a finished stream.
func (b *outbuf) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	for {
		b.mu.Lock()
		size, closed, grew := b.size, b.closed, b.grew
		b.mu.Unlock()
		if off < size {
			n := int64(len(p))
			if size-off < n {
				n = size - off
			}
			return b.f.ReadAt(p[:n], off)
		}
		if closed {
			return 0, io.EOF
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
