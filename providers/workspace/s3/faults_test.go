package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/providers/workspace/persist"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// faultProxy serves gofakes3 through a fault injector: fault, when set,
// sees each request first and may answer it itself.
type faultProxy struct {
	backend http.Handler
	srv     *httptest.Server
	mu      sync.Mutex
	fault   func(w http.ResponseWriter, r *http.Request) bool
}

func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	f := &faultProxy{backend: gofakes3.New(s3mem.New()).Server()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		fault := f.fault
		f.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
		f.backend.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	if _, err := s3test.Client(f.srv.URL).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *faultProxy) set(fault func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
}

// provider is an S3 workspace provider over the proxy, its client made
// from options (the production transport and retryer) with timeout.
func (f *faultProxy) provider(t *testing.T, timeout time.Duration) eval.WorkspaceProvider {
	t.Helper()
	p, err := aws3.New(aws3.Options{Bucket: "work", Endpoint: f.srv.URL, ForcePathStyle: true, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// s3Error answers an S3 error.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message><RequestId>1</RequestId></Error>`, code)
}

// saveBlob acquires id, writes a file of n random bytes, saves and
// releases, and returns the content.
func saveBlob(t *testing.T, p eval.WorkspaceProvider, id string, n int) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: id, Lock: true, EvaluationID: "faults", Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		return nil, err
	}
	data := make([]byte, n)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(l.Directory(), "blob.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	serr := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"})
	rerr := l.Release(ctx)
	return data, errors.Join(serr, rerr)
}

// loadBlob loads id's current revision and returns blob.bin.
func loadBlob(t *testing.T, p eval.WorkspaceProvider, id string) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: id, Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		return nil, err
	}
	defer l.Release(ctx)
	return os.ReadFile(filepath.Join(l.Directory(), "blob.bin"))
}

// assertSound checks the store after faults: the index is valid, the
// current revision loads as want, and no lock is left.
func assertSound(t *testing.T, f *faultProxy, id string, want []byte) {
	t.Helper()
	f.set(nil)
	p := f.provider(t, 5*time.Second)
	got, err := loadBlob(t, p, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after the faults the current revision loads %d bytes, %v; want the %d bytes last saved", len(got), err, len(want))
	}
	res, err := persist.Check(context.Background(), mustStorage(t, f), []string{id}, persist.CheckOptions{ReadData: true})
	if err != nil || len(res) != 1 || !res[0].OK() {
		t.Fatalf("after the faults the store is not sound: %+v, %v", res, err)
	}
	if _, err := s3test.Client(f.srv.URL).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("work"), Key: aws.String("aml/workspaces/" + id + "/lock.json")}); err == nil {
		t.Fatal("a lock was left behind")
	}
}

func mustStorage(t *testing.T, f *faultProxy) persist.Storage {
	t.Helper()
	st, err := aws3.NewStorage(aws3.Options{Bucket: "work", Endpoint: f.srv.URL, ForcePathStyle: true, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFaults: a service that fails now and then (5xx answers, 409
// ConditionalRequestConflict, a connection cut in the middle of a
// download, a lock that reads back empty, a stall) never leaves a run
// hanging past its bound, a damaged store or a lock behind.
func TestFaults(t *testing.T) {
	s3test.SetEnv(t)
	const size = 3 << 20

	t.Run("5xx", func(t *testing.T) {
		f := newFaultProxy(t)
		var n atomic.Int64
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if n.Add(1)%3 == 0 {
				s3Error(w, http.StatusServiceUnavailable, "SlowDown")
				return true
			}
			return false
		})
		p := f.provider(t, 5*time.Second)
		data, err := saveBlob(t, p, "w", size)
		if err != nil {
			t.Fatalf("a save through a service that answers every third request with 503: %v", err)
		}
		if got, err := loadBlob(t, p, "w"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("load through 503s: %d bytes, %v", len(got), err)
		}
		assertSound(t, f, "w", data)
	})

	t.Run("409", func(t *testing.T) {
		f := newFaultProxy(t)
		var conflicts atomic.Int64
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/workspace.json") && conflicts.Add(1) <= 2 {
				s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
				return true
			}
			return false
		})
		data, err := saveBlob(t, f.provider(t, 5*time.Second), "w", 1000)
		if err != nil {
			t.Fatalf("a save whose publication met ConditionalRequestConflict twice: %v", err)
		}
		assertSound(t, f, "w", data)
	})

	t.Run("cut", func(t *testing.T) {
		f := newFaultProxy(t)
		data, err := saveBlob(t, f.provider(t, 5*time.Second), "w", size)
		if err != nil {
			t.Fatal(err)
		}
		var cuts atomic.Int64
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/revisions/") || r.Header.Get("Range") != "" || cuts.Add(1) > 1 {
				return false
			}
			// The whole answer, of which half goes out before the
			// connection is cut.
			rec := httptest.NewRecorder()
			f.backend.ServeHTTP(rec, r)
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return true
			}
			defer conn.Close()
			body := rec.Body.Bytes()
			fmt.Fprintf(buf, "HTTP/1.1 %d OK\r\n", rec.Code)
			for k, vs := range rec.Header() {
				for _, v := range vs {
					fmt.Fprintf(buf, "%s: %s\r\n", k, v)
				}
			}
			fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n", len(body))
			buf.Write(body[:len(body)/2])
			buf.Flush()
			return true
		})
		got, err := loadBlob(t, f.provider(t, 5*time.Second), "w")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("a load whose download was cut half-way: %d bytes, %v", len(got), err)
		}
		if cuts.Load() < 1 {
			t.Fatal("no download was cut: the test tested nothing")
		}
		assertSound(t, f, "w", data)
	})

	t.Run("empty-lock-read", func(t *testing.T) {
		f := newFaultProxy(t)
		var empties atomic.Int64
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/lock.json") && empties.Add(1)%2 == 1 {
				w.Header().Set("ETag", `"0"`)
				w.WriteHeader(http.StatusOK)
				return true
			}
			return false
		})
		data, err := saveBlob(t, f.provider(t, 5*time.Second), "w", 1000)
		if err != nil {
			t.Fatalf("a save whose lock read back empty now and then: %v", err)
		}
		if empties.Load() == 0 {
			t.Fatal("no lock read was answered empty: the test tested nothing")
		}
		assertSound(t, f, "w", data)
	})

	t.Run("stall", func(t *testing.T) {
		f := newFaultProxy(t)
		first, err := saveBlob(t, f.provider(t, 5*time.Second), "w", 1000)
		if err != nil {
			t.Fatal(err)
		}
		// The publication of the next save is never answered: the service
		// takes the request and says nothing, as long as the client waits.
		var stalled atomic.Int64
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/workspace.json") {
				stalled.Add(1)
				// Read the request, so that the server notices the client
				// going away, then say nothing.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-time.After(time.Minute):
				}
				return true
			}
			return false
		})
		started := time.Now()
		_, err = saveBlob(t, f.provider(t, 300*time.Millisecond), "w", 1000)
		took := time.Since(started)
		if err == nil {
			t.Fatal("a save whose publication is never answered succeeded")
		}
		if !strings.Contains(err.Error(), "publish workspace.json") || !strings.Contains(err.Error(), "aml/workspaces/w/workspace.json") {
			t.Errorf("the failure does not name the operation and the key: %v", err)
		}
		// Every attempt ends after 0.3 s without an answer; with backoff,
		// far below a hang.
		if took > 20*time.Second {
			t.Fatalf("the stalled save took %s", took)
		}
		t.Logf("the save failed after %s and %d unanswered publications: %v", took, stalled.Load(), err)
		// The previous revision is still current, the failed save's
		// revision was removed, and the lock was released.
		assertSound(t, f, "w", first)
	})

	// The publication is applied by the service but its answer never
	// arrives: the retry meets 412, because the index already is the one
	// this save published. The save succeeded and its revision is current.
	t.Run("applied-unanswered", func(t *testing.T) {
		f := newFaultProxy(t)
		if _, err := saveBlob(t, f.provider(t, 5*time.Second), "w", 1000); err != nil {
			t.Fatal(err)
		}
		var applied atomic.Int64
		f.set(appliedUnanswered(f, &applied))
		data, err := saveBlob(t, f.provider(t, 300*time.Millisecond), "w", 1000)
		if applied.Load() != 1 {
			t.Fatalf("%d publications applied but unanswered, want 1: the test tested nothing", applied.Load())
		}
		if err != nil {
			t.Fatalf("a save whose publication was applied but unanswered: %v", err)
		}
		assertSound(t, f, "w", data)
	})

	// As above, and the index cannot be read back either: the outcome is
	// unknown, so the save fails and removes nothing; the revision it
	// published stays whole.
	t.Run("applied-unanswered-unreadable", func(t *testing.T) {
		f := newFaultProxy(t)
		if _, err := saveBlob(t, f.provider(t, 5*time.Second), "w", 1000); err != nil {
			t.Fatal(err)
		}
		var applied atomic.Int64
		unanswered := appliedUnanswered(f, &applied)
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if applied.Load() > 0 && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/workspace.json") {
				s3Error(w, http.StatusServiceUnavailable, "SlowDown")
				return true
			}
			return unanswered(w, r)
		})
		data, err := saveBlob(t, f.provider(t, 300*time.Millisecond), "w", 1000)
		if applied.Load() != 1 {
			t.Fatalf("%d publications applied but unanswered, want 1: the test tested nothing", applied.Load())
		}
		if err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Fatalf("a save whose publication outcome cannot be learned: %v, want an error that says the outcome is unknown", err)
		}
		assertSound(t, f, "w", data)
	})
}

// appliedUnanswered is a fault that forwards the first conditional
// publication of workspace.json to the service, then holds the client's
// request unanswered until the client gives up; applied counts them.
func appliedUnanswered(f *faultProxy, applied *atomic.Int64) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/workspace.json") || r.Header.Get("If-Match") == "" || applied.Load() > 0 {
			return false
		}
		f.backend.ServeHTTP(httptest.NewRecorder(), r)
		applied.Add(1)
		<-r.Context().Done()
		return true
	}
}

// TestStalledEndpoint: a service that accepts connections and never
// answers fails a run's operation within request_timeout_ms (60 s by
// default), after retries whose attempts each wait response_timeout_ms
// (10 s by default), with an error that names the endpoint and the
// option; a transfer that keeps moving for longer than the bound is not
// cut.
func TestStalledEndpoint(t *testing.T) {
	// Static credentials and region, so that the test reads no
	// environment and runs beside the package's others.
	t.Parallel()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")}
	t.Run("never-answers", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		var conns atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				// Take what comes, answer nothing.
				go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
			}
		}()
		endpoint := "http://" + ln.Addr().String()
		p, err := aws3.New(aws3.Options{Bucket: "work", Endpoint: endpoint, ForcePathStyle: true, Config: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		_, err = p.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, EvaluationID: "stall", Load: &eval.WorkspaceLoad{Revision: "current"}})
		took := time.Since(started)
		var se *aws3.StallError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "request_timeout_ms") {
			t.Fatalf("an acquisition from an endpoint that never answers: %v", err)
		}
		if took > aws3.DefaultRequestTimeout+10*time.Second {
			t.Fatalf("it failed after %s, past the %s bound", took, aws3.DefaultRequestTimeout)
		}
		if n := conns.Load(); n < 2 {
			t.Fatalf("%d connections: the request was not tried again after %s", n, aws3.DefaultResponseTimeout)
		}
		t.Logf("failed after %s and %d attempts: %v", took.Round(time.Millisecond), conns.Load(), err)
	})
	t.Run("slow-transfer", func(t *testing.T) {
		t.Parallel()
		f := newFaultProxy(t)
		saver, err := aws3.New(aws3.Options{Bucket: "work", Endpoint: f.srv.URL, ForcePathStyle: true, Config: &cfg, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		want, err := saveBlob(t, saver, "w", 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		// The service sends each large object slowly: 64 KiB every 20 ms,
		// its answer ready at once (the fake service's own work on 16 MiB,
		// slow under the race detector, is done beforehand), so that the
		// answer starts at once and then only trickles.
		var (
			slowed atomic.Int64
			mu     sync.Mutex
			ready  = map[string]*httptest.ResponseRecorder{}
		)
		answer := func(r *http.Request) *httptest.ResponseRecorder {
			mu.Lock()
			defer mu.Unlock()
			if rec := ready[r.URL.Path]; rec != nil && r.Header.Get("Range") == "" {
				return rec
			}
			rec := httptest.NewRecorder()
			f.backend.ServeHTTP(rec, r)
			if r.Header.Get("Range") == "" {
				ready[r.URL.Path] = rec
			}
			return rec
		}
		f.set(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/revisions/") {
				return false
			}
			slowed.Add(1)
			rec := answer(r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			for len(body) > 0 {
				n := min(len(body), 64<<10)
				if _, err := w.Write(body[:n]); err != nil {
					return true
				}
				w.(http.Flusher).Flush()
				body = body[n:]
				time.Sleep(20 * time.Millisecond) // the stimulus: a slow network
			}
			return true
		})
		// Prepare the answers: a read of every revision through the proxy.
		cli := s3test.Client(f.srv.URL)
		list, err := cli.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("work"), Prefix: aws.String("aml/workspaces/w/revisions/")})
		if err != nil || len(list.Contents) == 0 {
			t.Fatalf("the revisions: %v", err)
		}
		for _, o := range list.Contents {
			out, err := cli.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("work"), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, out.Body)
			out.Body.Close()
		}
		slowed.Store(0)
		p, err := aws3.New(aws3.Options{Bucket: "work", Endpoint: f.srv.URL, ForcePathStyle: true, Config: &cfg, RequestTimeout: 2 * time.Second, ResponseTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		got, err := loadBlob(t, p, "w")
		took := time.Since(started)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("a load whose download moves slowly for longer than request_timeout_ms: %d bytes, %v", len(got), err)
		}
		if slowed.Load() == 0 || took < 4*time.Second {
			t.Fatalf("the download was not slowed (%d slowed downloads, %s)", slowed.Load(), took)
		}
		t.Logf("a 16 MiB load moving for %s under a 2 s bound", took.Round(time.Millisecond))
	})

}
