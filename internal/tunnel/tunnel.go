// Package tunnel carries unix socket connections between the host and a
// remote sandbox over one process's standard streams, for sandboxes that
// share no directory and no network with the host (Daytona, Modal): an
// agent's tool relay in the sandbox connects to a socket there as it
// would to one in a shared directory, and the connection reaches the
// host's tool bridge.
//
// The guest end (aml sandbox-tunnel DIR, started in the sandbox) listens
// in DIR on the names the host tells it; the host end watches a host
// directory for sockets, tells the guest to listen on each new name, and
// dials the host socket of that name for every connection the guest
// accepts. Frames in either direction are lines of text, because some
// services carry a process's output line by line and not byte for byte:
// a type letter, the connection id in decimal and the payload in base64
// (standard alphabet, no padding), separated by single spaces:
//
//	H 0 ...  hello (guest→host): the guest end runs (its first frame)
//	L 0 ...  listen (host→guest): payload is a socket name
//	O id ... open (guest→host): a connection to the socket named by the payload
//	D id ... data (both): bytes of a connection
//	C id     close (both): the connection ended
package tunnel

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Frame types.
const (
	frameHello  byte = 'H'
	frameListen byte = 'L'
	frameOpen   byte = 'O'
	frameData   byte = 'D'
	frameClose  byte = 'C'
)

// chunk is the most a data frame carries, and maxLine bounds a frame's
// line (a chunk in base64 and the header).
const (
	chunk   = 8 << 10
	maxLine = 16 << 10
)

// writer serializes frames onto one stream.
type writer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (w *writer) frame(typ byte, id uint32, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := make([]byte, 0, 16+base64.RawStdEncoding.EncodedLen(len(payload)))
	line = append(line, typ, ' ')
	line = strconv.AppendUint(line, uint64(id), 10)
	line = append(line, ' ')
	line = base64.RawStdEncoding.AppendEncode(line, payload)
	line = append(line, '\n')
	if _, err := w.w.Write(line); err != nil {
		return err
	}
	return w.w.Flush()
}

// newReader reads frames; its buffer holds the longest line.
func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, maxLine) }

func readFrame(r *bufio.Reader) (byte, uint32, []byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return 0, 0, nil, fmt.Errorf("tunnel frame longer than %d bytes", maxLine)
	}
	if err != nil {
		if len(line) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, nil, err
	}
	fields := strings.SplitN(strings.TrimRight(string(line), "\r\n"), " ", 3)
	if len(fields) != 3 || len(fields[0]) != 1 {
		return 0, 0, nil, fmt.Errorf("malformed tunnel frame %.40q", line)
	}
	id, err := strconv.ParseUint(fields[1], 10, 32)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("malformed tunnel frame %.40q", line)
	}
	payload, err := base64.RawStdEncoding.DecodeString(fields[2])
	if err != nil {
		return 0, 0, nil, fmt.Errorf("malformed tunnel frame %.40q", line)
	}
	return fields[0][0], uint32(id), payload, nil
}

// conns are the open connections of one end, by id.
type conns struct {
	mu sync.Mutex
	m  map[uint32]net.Conn
}

func (c *conns) put(id uint32, conn net.Conn) {
	c.mu.Lock()
	c.m[id] = conn
	c.mu.Unlock()
}

func (c *conns) get(id uint32) net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// drop closes and forgets id; it reports whether it was open.
func (c *conns) drop(id uint32) bool {
	c.mu.Lock()
	conn, ok := c.m[id]
	delete(c.m, id)
	c.mu.Unlock()
	if ok {
		conn.Close()
	}
	return ok
}

func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, conn := range c.m {
		conn.Close()
		delete(c.m, id)
	}
}

// pump copies conn's reads into data frames until it ends, then sends
// close (unless the other end closed it first).
func pump(w *writer, cs *conns, id uint32, conn net.Conn) {
	buf := make([]byte, chunk)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if werr := w.frame(frameData, id, buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if cs.drop(id) {
		_ = w.frame(frameClose, id, nil)
	}
}

// validName reports whether a socket name is a plain file name.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") && len(name) < 100
}

// Guest runs the guest end: it listens in dir on the names the host
// sends on in, and carries every connection over in and out. It returns
// when in ends (the host went away) or ctx ends, closing everything.
func Guest(ctx context.Context, dir string, in io.Reader, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	w := &writer{w: bufio.NewWriter(out)}
	cs := &conns{m: map[uint32]net.Conn{}}
	defer cs.closeAll()
	var lmu sync.Mutex
	var listeners []net.Listener
	defer func() {
		lmu.Lock()
		for _, l := range listeners {
			l.Close()
		}
		lmu.Unlock()
	}()
	var next uint32
	var nextMu sync.Mutex
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := w.frame(frameHello, 0, nil); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		r := newReader(in)
		for {
			typ, id, payload, err := readFrame(r)
			if err != nil {
				errc <- err
				return
			}
			switch typ {
			case frameListen:
				name := string(payload)
				if !validName(name) {
					continue
				}
				p := filepath.Join(dir, name)
				_ = os.Remove(p)
				l, err := net.Listen("unix", p)
				if err != nil {
					fmt.Fprintf(os.Stderr, "aml sandbox-tunnel: listening on %s: %v\n", p, err)
					continue
				}
				_ = os.Chmod(p, 0o777)
				lmu.Lock()
				listeners = append(listeners, l)
				lmu.Unlock()
				go func() {
					for {
						conn, err := l.Accept()
						if err != nil {
							return
						}
						nextMu.Lock()
						next++
						id := next
						nextMu.Unlock()
						cs.put(id, conn)
						if err := w.frame(frameOpen, id, []byte(name)); err != nil {
							cs.drop(id)
							return
						}
						go pump(w, cs, id, conn)
					}
				}()
			case frameData:
				if conn := cs.get(id); conn != nil {
					if _, err := conn.Write(payload); err != nil && cs.drop(id) {
						_ = w.frame(frameClose, id, nil)
					}
				}
			case frameClose:
				cs.drop(id)
			}
		}
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// Start waits up to timeout for the guest end's hello on fromGuest, then
// runs Host on its own goroutine; wait returns Host's error once it
// returned. An error means the guest end did not start (what it printed
// is the caller's to report).
func Start(ctx context.Context, dir string, poll time.Duration, toGuest io.Writer, fromGuest io.Reader, timeout time.Duration) (wait func() error, err error) {
	r := newReader(fromGuest)
	hello := make(chan error, 1)
	go func() {
		typ, _, _, err := readFrame(r)
		if err == nil && typ != frameHello {
			err = fmt.Errorf("the guest end's first frame is %q, not hello", typ)
		}
		hello <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-hello:
		if err != nil {
			return nil, fmt.Errorf("the tunnel's guest end did not start: %w", err)
		}
	case <-t.C:
		return nil, fmt.Errorf("the tunnel's guest end did not start within %v", timeout)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- host(ctx, dir, poll, toGuest, r) }()
	return func() error { return <-done }, nil
}

// Host runs the host end for the guest end whose input is toGuest and
// output fromGuest: it tells the guest to listen on the name of every
// socket that appears in dir (checked every poll), and dials dir/<name>
// for every connection the guest accepts. It returns when fromGuest ends
// or ctx ends. The guest's hello frame, when it comes first, is skipped.
func Host(ctx context.Context, dir string, poll time.Duration, toGuest io.Writer, fromGuest io.Reader) error {
	return host(ctx, dir, poll, toGuest, newReader(fromGuest))
}

func host(ctx context.Context, dir string, poll time.Duration, toGuest io.Writer, r *bufio.Reader) error {
	w := &writer{w: bufio.NewWriter(toGuest)}
	cs := &conns{m: map[uint32]net.Conn{}}
	defer cs.closeAll()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		told := map[string]bool{}
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Type()&os.ModeSocket == 0 || told[e.Name()] || !validName(e.Name()) {
					continue
				}
				told[e.Name()] = true
				if err := w.frame(frameListen, 0, []byte(e.Name())); err != nil {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	for {
		typ, id, payload, err := readFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch typ {
		case frameOpen:
			name := string(payload)
			var conn net.Conn
			if validName(name) {
				var d net.Dialer
				conn, err = d.DialContext(ctx, "unix", filepath.Join(dir, name))
			} else {
				err = fmt.Errorf("invalid socket name %q", name)
			}
			if err != nil {
				_ = w.frame(frameClose, id, nil)
				continue
			}
			cs.put(id, conn)
			go pump(w, cs, id, conn)
		case frameData:
			if conn := cs.get(id); conn != nil {
				if _, err := conn.Write(payload); err != nil && cs.drop(id) {
					_ = w.frame(frameClose, id, nil)
				}
			}
		case frameClose:
			cs.drop(id)
		}
	}
}
