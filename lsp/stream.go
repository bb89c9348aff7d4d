package lsp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// MaxMessageSize is the largest message body, in bytes, the server
// accepts; a Content-Length over it ends the session with an error.
const MaxMessageSize = 64 << 20

// FramingError is a message the server cannot frame: a header it cannot
// use, a Content-Length over MaxMessageSize, or a body cut short by the
// end of the stream. The stream cannot be resynchronized after one, so
// the session ends with it.
type FramingError struct {
	Msg string
	Err error // the underlying read error, if any
}

func (e *FramingError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *FramingError) Unwrap() error { return e.Err }

// stream is the server's jsonrpc2.Stream: LSP base-protocol framing
// that validates headers before a message reaches the connection, and
// answers a body that is not JSON-RPC with an error reply (id null)
// instead of ending the session. Write is serialized by mu because Read
// writes those error replies too.
type stream struct {
	rwc io.ReadWriteCloser
	in  *bufio.Reader
	mu  sync.Mutex
}

func newStream(rwc io.ReadWriteCloser) *stream {
	return &stream{rwc: rwc, in: bufio.NewReader(rwc)}
}

// Read implements jsonrpc2.Stream.
func (s *stream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		data, n, err := s.readFrame()
		if err != nil {
			return nil, n, err
		}
		if !json.Valid(data) {
			s.replyError(ctx, jsonrpc2.ParseError, "the message body is not valid JSON")
			continue
		}
		msg, err := jsonrpc2.DecodeMessage(data)
		if err != nil {
			s.replyError(ctx, jsonrpc2.InvalidRequest, fmt.Sprintf("the message is not a JSON-RPC request, notification or response: %v", err))
			continue
		}
		return msg, n, nil
	}
}

// readFrame reads one header block and its body. Header lines may end
// in CRLF or LF, and blank lines before a header are skipped. A clean
// end of the stream before a header is io.EOF; anything else wrong is a
// *FramingError.
func (s *stream) readFrame() ([]byte, int64, error) {
	var total int64
	length := int64(-1)
	for lines := 0; ; lines++ {
		raw, err := s.in.ReadSlice('\n')
		line := string(raw)
		total += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, total, &FramingError{Msg: fmt.Sprintf("header line longer than %d bytes", s.in.Size())}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && lines == 0 && line == "" {
				return nil, total, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return nil, total, &FramingError{Msg: fmt.Sprintf("the stream ended inside a message header (after %q)", line), Err: io.ErrUnexpectedEOF}
			}
			return nil, total, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if lines == 0 {
				// Blank lines between messages are tolerated.
				lines--
				continue
			}
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, total, &FramingError{Msg: fmt.Sprintf("bad header line %q: want \"Name: value\"", line)}
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(strings.TrimSpace(name), "Content-Length"):
			n, err := strconv.ParseInt(value, 10, 64)
			switch {
			case err != nil || n < 0:
				return nil, total, &FramingError{Msg: fmt.Sprintf("bad Content-Length %q: want a non-negative decimal number", value)}
			case n > MaxMessageSize:
				return nil, total, &FramingError{Msg: fmt.Sprintf("Content-Length %d is over the limit of %d bytes (64 MiB)", n, MaxMessageSize)}
			}
			length = n
		case strings.EqualFold(strings.TrimSpace(name), "Content-Type"):
			// Any charset is taken as utf-8, as other servers do.
		}
	}
	if length < 0 {
		return nil, total, &FramingError{Msg: "the message header has no Content-Length"}
	}
	data := make([]byte, length)
	n, err := io.ReadFull(s.in, data)
	total += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, total, &FramingError{Msg: fmt.Sprintf("the stream ended after %d of the %d bytes of Content-Length", n, length), Err: io.ErrUnexpectedEOF}
		}
		return nil, total, err
	}
	return data, total, nil
}

// replyError answers a message that could not be decoded; its id is
// unknown, so the reply's id is null.
func (s *stream) replyError(ctx context.Context, code jsonrpc2.Code, msg string) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": msg},
	})
	_, _ = s.writeRaw(body)
}

// Write implements jsonrpc2.Stream.
func (s *stream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var data []byte
	var err error
	if m, ok := msg.(json.Marshaler); ok {
		// The messages encode themselves compactly: calling that directly
		// spares encoding/json's second pass over the whole body.
		data, err = m.MarshalJSON()
	} else {
		data, err = json.Marshal(msg)
	}
	if err != nil {
		return 0, fmt.Errorf("encoding a message: %w", err)
	}
	return s.writeRaw(data)
}

func (s *stream) writeRaw(data []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := make([]byte, 0, len(data)+32)
	buf = fmt.Appendf(buf, "Content-Length: %d\r\n\r\n", len(data))
	buf = append(buf, data...)
	n, err := s.rwc.Write(buf)
	if err != nil {
		return int64(n), fmt.Errorf("writing a message: %w", err)
	}
	return int64(n), nil
}

// Close implements jsonrpc2.Stream.
func (s *stream) Close() error { return s.rwc.Close() }
