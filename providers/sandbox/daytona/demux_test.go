package daytona

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestDemuxSplits feeds a labelled log cut at every byte: labels,
// lines and the end mark split across messages come out the same.
func TestDemuxSplits(t *testing.T) {
	rec := func(label []byte, line string) []byte { return append(append([]byte(nil), label...), line...) }
	log := bytes.Join([][]byte{
		rec(stdoutLabel, "one\n"),
		rec(stderrLabel, "e\x01\x01\x01rr\n"),
		rec(stdoutLabel, "\x02\x02\x02two\n"),
		rec(stdoutLabel, "\n"),
		rec(stderrLabel, "partialMARK\n"),
		rec(stdoutLabel, "MARK\n"),
	}, nil)
	for size := 1; size <= len(log); size++ {
		outR, outW := io.Pipe()
		errR, errW := io.Pipe()
		d := &demuxer{out: &tail{w: outW, mark: []byte("MARK\n")}, err: &tail{w: errW, mark: []byte("MARK\n")}}
		var out, errs []byte
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); out, _ = io.ReadAll(outR) }()
		go func() { defer wg.Done(); errs, _ = io.ReadAll(errR) }()
		for b := log; len(b) > 0; b = b[min(size, len(b)):] {
			d.write(b[:min(size, len(b))])
		}
		outMarked, errMarked := d.out.finish(nil), d.err.finish(nil)
		wg.Wait()
		if string(out) != "one\n\x02\x02\x02two\n\n" || string(errs) != "e\x01\x01\x01rr\npartial" || !outMarked || !errMarked {
			t.Fatalf("messages of %d bytes: stdout %q, stderr %q, marked %v %v", size, out, errs, outMarked, errMarked)
		}
	}
}

// TestRetryAfter reads both forms of the header.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"soon":                          0,
		"-3":                            0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestErrorMessages reads the service's error bodies, and never shows
// the key.
func TestErrorMessages(t *testing.T) {
	for body, want := range map[string]string{
		`{"statusCode":404,"message":"Sandbox with ID or name x not found","error":"Not Found"}`: "Sandbox with ID or name x not found",
		`{"message":["cpu must be an integer","disk must be positive"]}`:                         "cpu must be an integer; disk must be positive",
		`{"error":"session not found"}`:                                                          "session not found",
		`upstream connect error`:                                                                 "upstream connect error",
	} {
		if got := errorMessage([]byte(body)); got != want {
			t.Errorf("errorMessage(%s) = %q, want %q", body, got, want)
		}
	}
	s, err := New(Options{APIKey: "dtn_secret_key"})
	if err != nil {
		t.Fatal(err)
	}
	e := &APIError{Op: "listing sandboxes", StatusCode: http.StatusUnauthorized, Message: s.redact("bad token dtn_secret_key")}
	if msg := e.Error(); bytes.Contains([]byte(msg), []byte("dtn_secret_key")) || !bytes.Contains([]byte(msg), []byte("401")) {
		t.Errorf("Error() = %q", msg)
	}
}
