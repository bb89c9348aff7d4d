package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/s3test"
	"github.com/aml-go/aml/providers/providertest"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// fake serves gofakes3 in process and returns a real SDK client of it
// (path-style, fake credentials) with the bucket created.
func fake(t testing.TB, bucket string) *s3.Client {
	t.Helper()
	_, cli := s3test.Server(t, bucket)
	return cli
}

func TestConformance(t *testing.T) {
	for _, format := range []string{"archive", "folder"} {
		t.Run(format, func(t *testing.T) {
			p, err := aws3.New(aws3.Options{Client: fake(t, "work"), Bucket: "work", StoreOptions: persist.StoreOptions{Format: format}})
			if err != nil {
				t.Fatal(err)
			}
			providertest.RunWorkspace(t, p, providertest.WorkspaceOptions{CheckContent: true})
		})
	}
}

// TestRoundTrip: a saved revision is restored by the next acquisition,
// through the seed's layout in the bucket.
func TestRoundTrip(t *testing.T) {
	cli := fake(t, "work")
	p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work", Prefix: "teams/a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "notes", Lock: true, EvaluationID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lease.Directory(), "note.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := lease.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	list, err := cli.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("work")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Contents {
		keys[aws.ToString(o.Key)] = true
	}
	if !keys["teams/a/notes/workspace.json"] || keys["teams/a/notes/lock.json"] {
		t.Errorf("objects after a save and release: %v (want the index, no lock)", keys)
	}
	again, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "notes", Lock: true, EvaluationID: "r2", Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release(ctx)
	if b, err := os.ReadFile(filepath.Join(again.Directory(), "note.txt")); err != nil || string(b) != "kept" {
		t.Errorf("restored %q, %v", b, err)
	}
}

// TestLock: a second writer conflicts; a lock nobody refreshed for the
// stale age is taken over, and its old holder then fails to publish.
func TestLock(t *testing.T) {
	cli := fake(t, "work")
	st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st.SetClock(func() time.Time { return now }, time.Hour, 20*time.Minute)
	ctx := context.Background()
	first, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true})
	var conflict *eval.WorkspaceConflictError
	if !errors.As(err, &conflict) || conflict.WorkspaceID != "w" {
		t.Fatalf("a second writer: %v, want a WorkspaceConflictError", err)
	}
	if !strings.Contains(err.Error(), eval.WorkspaceConflictCode) {
		t.Errorf("the conflict does not carry its code: %v", err)
	}
	// Twenty-one minutes without a refresh: the lock is stale.
	now = now.Add(21 * time.Minute)
	second, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true})
	if err != nil {
		t.Fatalf("taking a stale lock over: %v", err)
	}
	defer second.Release(ctx)
	if err := first.(persist.LockChecker).CheckLock(ctx); !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("the old holder's CheckLock: %v, want ErrLockLost", err)
	}
	if _, err := first.Write(ctx, "x", strings.NewReader("x"), persist.WriteOptions{ContentLength: 1}); !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("the old holder's write: %v, want ErrLockLost", err)
	}
	if err := first.Release(ctx); !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("the old holder's release: %v, want ErrLockLost", err)
	}
}

// TestBadInput: names S3 rejects, prefixes that are not paths, a missing
// bucket: clear errors.
func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		opts aws3.Options
		want string
	}{
		{aws3.Options{Bucket: "b1"}, "is not a valid bucket name"},
		{aws3.Options{Bucket: "Upper"}, "is not a valid bucket name"},
		{aws3.Options{Bucket: "work", Prefix: "a//b"}, "prefix"},
		{aws3.Options{Bucket: "work", Prefix: "/abs"}, "prefix"},
		{aws3.Options{Bucket: "work", Prefix: "a/../b"}, "prefix"},
	} {
		c.opts.Client = s3.New(s3.Options{Region: "us-east-1"})
		if _, err := aws3.New(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.opts, err, c.want)
		}
	}
	p, err := aws3.New(aws3.Options{Client: fake(t, "work"), Bucket: "nosuch-bucket"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "w", Lock: true})
	if err == nil || !strings.Contains(err.Error(), `the bucket "nosuch-bucket" does not exist`) {
		t.Errorf("a missing bucket: %v", err)
	}
}

// TestStaleWriter: a writer without the lock that read the index before
// another published is refused, saying to reload, and the published
// revision stays current.
func TestStaleWriter(t *testing.T) {
	p, err := aws3.New(aws3.Options{Client: fake(t, "work"), Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	save := func(l eval.WorkspaceLease, content string) error {
		if err := os.WriteFile(filepath.Join(l.Directory(), "f.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"})
	}
	stale, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Release(ctx)
	writer, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := save(writer, "published"); err != nil {
		t.Fatal(err)
	}
	if err := writer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = save(stale, "stale")
	if !errors.Is(err, persist.ErrPreconditionFailed) || !strings.Contains(err.Error(), "reload") {
		t.Fatalf("the stale writer's save: %v, want a precondition failure that says to reload", err)
	}
	check, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Release(ctx)
	if b, _ := os.ReadFile(filepath.Join(check.Directory(), "f.txt")); string(b) != "published" {
		t.Errorf("current revision holds %q, want the published one", b)
	}
}

// TestFolderPagination: a folder revision of more than 1,000 files (one
// ListObjectsV2 page) is saved and restored whole.
func TestFolderPagination(t *testing.T) {
	p, err := aws3.New(aws3.Options{Client: fake(t, "work"), Bucket: "work", StoreOptions: persist.StoreOptions{Format: "folder"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "many", Lock: true, Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1100 {
		if err := os.WriteFile(filepath.Join(l.Directory(), fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "many", Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	entries, err := os.ReadDir(r.Directory())
	if err != nil || len(entries) != 1100 {
		t.Fatalf("restored %d files, %v; want 1100", len(entries), err)
	}
}

// TestHeartbeat: the lock is refreshed while held; a lock overwritten by
// someone else is found lost at the next refresh.
func TestHeartbeat(t *testing.T) {
	cli := fake(t, "work")
	st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	st.SetClock(time.Now, 30*time.Millisecond, 20*time.Minute)
	ctx := context.Background()
	l, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true})
	if err != nil {
		t.Fatal(err)
	}
	etag := func() string {
		out, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("work"), Key: aws.String("aml/workspaces/w/lock.json")})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ETag)
	}
	first := etag()
	deadline := time.Now().Add(30 * time.Second) // many refreshes; a loaded machine delays them
	for etag() == first && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if etag() == first {
		t.Fatal("the lock was never refreshed")
	}
	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("work"), Key: aws.String("aml/workspaces/w/lock.json"), Body: strings.NewReader(`{"owner":"intruder"}`)}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := l.Write(ctx, "x", strings.NewReader("x"), persist.WriteOptions{ContentLength: 1})
		if errors.Is(err, aws3.ErrLockLost) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes after the lock was overwritten: %v, want ErrLockLost", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Release(ctx); !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("Release of a lost lock: %v", err)
	}
}

// TestVerify: the protocol contract against gofakes3, which honours
// every required operation and ignores conditional GET and DELETE.
func TestVerify(t *testing.T) {
	cli := fake(t, "work")
	rep, err := aws3.Verify(context.Background(), cli, "work", "teams")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Trusted {
		t.Errorf("gofakes3 is not trusted: %+v", rep.Checks)
	}
	got := map[string]string{}
	for _, c := range rep.Checks {
		got[c.Operation] = c.Result
	}
	for op, want := range map[string]string{
		"PutObject If-None-Match: * on an existing key":       aws3.Honoured,
		"PutObject If-Match with a wrong ETag":                aws3.Honoured,
		"10 concurrent PutObject If-None-Match: * on one key": aws3.Honoured,
		"ListObjectsV2 with continuation tokens":              aws3.Honoured,
		"GetObject If-Match with a wrong ETag":                aws3.Ignored,
		"DeleteObject If-Match with a wrong ETag":             aws3.Ignored,
	} {
		if got[op] != want {
			t.Errorf("%s: %s, want %s", op, got[op], want)
		}
	}
	list, err := cli.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("work")})
	if err != nil || len(list.Contents) != 0 {
		t.Errorf("verify left %d objects (%v)", len(list.Contents), err)
	}
	if _, err := aws3.Verify(context.Background(), cli, "nosuch-bucket", "p"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("verify of a missing bucket: %v", err)
	}
}

// TestUnreachableAndMissing: an endpoint that does not answer fails
// within the context's bound, saying so; a revision id that does not
// exist is refused.
func TestUnreachableAndMissing(t *testing.T) {
	dead := httptest.NewServer(nil)
	url := dead.URL
	dead.Close() // nothing listens there any more
	p, err := aws3.New(aws3.Options{Client: s3test.Client(url), Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true})
	if err == nil || !strings.Contains(err.Error(), "the endpoint does not answer") {
		t.Errorf("an endpoint that does not answer: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("it took %v", d)
	}

	live, err := aws3.New(aws3.Options{Client: fake(t, "work"), Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = live.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{Revision: "no-such-revision"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-revision") {
		t.Errorf("a revision that does not exist: %v", err)
	}
}

// TestUnchangedFolderResave: saving an unchanged folder revision again
// sends no file content: the files are server-side copies, and the only
// uploads are the small manifest and index objects.
func TestUnchangedFolderResave(t *testing.T) {
	var mu sync.Mutex
	var uploads []string
	var copies int
	backend := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			mu.Lock()
			if r.Header.Get("X-Amz-Copy-Source") != "" {
				copies++
			} else {
				uploads = append(uploads, r.URL.Path)
			}
			mu.Unlock()
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cli := s3test.Client(srv.URL)
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work", StoreOptions: persist.StoreOptions{Format: "folder"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	saveAll := func(write bool) {
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{Revision: "current"}})
		if err != nil {
			t.Fatal(err)
		}
		if write {
			for i := range 50 {
				if err := os.WriteFile(filepath.Join(l.Directory(), fmt.Sprintf("f%02d.txt", i)), []byte(strings.Repeat("x", 1000+i)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	saveAll(true)
	mu.Lock()
	uploads, copies = nil, 0
	mu.Unlock()
	saveAll(false)
	mu.Lock()
	defer mu.Unlock()
	var files []string
	for _, u := range uploads {
		if strings.Contains(u, "/f") && strings.HasSuffix(u, ".txt") {
			files = append(files, u)
		}
	}
	if len(files) != 0 || copies != 50 {
		t.Errorf("re-saving an unchanged folder uploaded %d files (%v) and copied %d, want 0 uploads and 50 copies; all uploads: %v", len(files), files, copies, uploads)
	}
}

// TestMultipart: a body larger than one part is uploaded in parts
// (streamed, one part in memory) and reads back whole; through the
// provider, an archive revision over the part size round-trips.
func TestMultipart(t *testing.T) {
	cli := fake(t, "work")
	st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	st.SetPartSize(5 << 20)
	ctx := context.Background()
	l, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	data := make([]byte, 11<<20+123) // incompressible, so the archive is over the part size too
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	v, err := l.Write(ctx, "revisions/r1/archive.tar.gz", io.NopCloser(bytes.NewReader(data)), persist.WriteOptions{Condition: persist.Absent, ContentLength: -1})
	if err != nil || v == "" {
		t.Fatalf("multipart write: %q, %v", v, err)
	}
	rc, got, err := l.Read(ctx, "revisions/r1/archive.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(back, data) || got != v {
		t.Errorf("read back %d bytes (want %d), version %q (want %q)", len(back), len(data), got, v)
	}
	uploads, err := cli.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("work")})
	if err == nil && len(uploads.Uploads) != 0 {
		t.Errorf("%d multipart uploads left open", len(uploads.Uploads))
	}

	// An archive revision over the part size, through the provider.
	p := persist.New(st, persist.Options{StoreOptions: persist.StoreOptions{Format: "archive"}})
	ws, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "big", Lock: true, Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Directory(), "blob.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ws.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := ws.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "big", Load: &eval.WorkspaceLoad{Revision: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if b, err := os.ReadFile(filepath.Join(r.Directory(), "blob.bin")); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the restored 11 MB file differs (%d bytes, %v)", len(b), err)
	}
}

// TestBrokenServer: a service that ignores conditional writes (as s3rver
// does; simulated by stripping the conditions before gofakes3) is not
// trusted by Verify, and s3_workspace() refuses it before writing
// anything, naming the verify command and the opt-out. With the opt-out,
// a writer whose lock another writer overwrote there fails its save
// with ErrLockLost instead of publishing.
func TestBrokenServer(t *testing.T) {
	backend := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Match")
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cli := s3test.Client(srv.URL)
	ctx := context.Background()
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	rep, err := aws3.Verify(ctx, cli, "work", "v")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Trusted {
		t.Errorf("a service that ignores conditional writes is trusted: %+v", rep.Checks)
	}
	refused, err := aws3.New(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	for _, lock := range []bool{true, false} {
		_, err = refused.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: lock, Load: &eval.WorkspaceLoad{}})
		if !errors.Is(err, aws3.ErrUntrusted) || !strings.Contains(err.Error(), "aml workspace verify s3://work/aml/workspaces") || !strings.Contains(err.Error(), "accept_lost_updates = True") {
			t.Fatalf("acquiring on a service that ignores conditional writes (lock %v): %v", lock, err)
		}
	}
	list, err := cli.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("work"), Prefix: aws.String("aml/")})
	if err != nil || len(list.Contents) != 0 {
		t.Fatalf("the refused acquisitions left objects: %v, %v", list.Contents, err)
	}
	p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work", AcceptLostUpdates: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(ctx)
	second, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{}})
	if err != nil {
		t.Fatalf("the broken service refused the second lock after all: %v", err)
	}
	defer second.Release(ctx)
	if err := os.WriteFile(filepath.Join(first.Directory(), "f.txt"), []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = first.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"})
	if !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("the overwritten writer's save: %v, want ErrLockLost", err)
	}
}

// TestConditionsCheckedOnce: the check of conditional writes runs on the
// first acquisition of a service and bucket in the process, not again.
func TestConditionsCheckedOnce(t *testing.T) {
	var puts atomic.Int64
	backend := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, ".aml-probe-") {
			puts.Add(1)
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cli := s3test.Client(srv.URL)
	ctx := context.Background()
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("work")}); err != nil {
		t.Fatal(err)
	}
	p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	for range 3 {
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := puts.Load(); n != 3 {
		t.Fatalf("%d probe writes for three acquisitions, want the three of one check", n)
	}
	t.Logf("three acquisitions, the first with the check: %s", time.Since(started))
}

// TestNames: names legal on Linux though not portable, in both formats,
// through gofakes3.
func TestNames(t *testing.T) {
	persisttest.RunNames(t, func(tb testing.TB) persist.Storage {
		st, err := aws3.NewStorage(aws3.Options{Client: fake(tb, "work"), Bucket: "work", Prefix: "names"})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	})
}

// TestDamage: the store-damage suite (a lost or damaged index, swapped
// and truncated revisions; check and recover) against gofakes3.
func TestDamage(t *testing.T) {
	persisttest.RunDamage(t, func(tb testing.TB) persist.Storage {
		st, err := aws3.NewStorage(aws3.Options{Client: fake(tb, "work"), Bucket: "work", Prefix: "damage"})
		if err != nil {
			tb.Fatal(err)
		}
		return st
	})
}

// TestDeadHolder: a lock whose holder is a process of this machine that
// is gone is taken over at once; a live holder's conflict names the full
// key, the holder and the fix; Unlock removes a dead holder's lock, and a
// live one's only with force.
func TestDeadHolder(t *testing.T) {
	cli := fake(t, "work")
	st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadLock := func() {
		t.Helper()
		rec := fmt.Sprintf(`{"owner":"old","evaluationId":"killed-run","process":"aml-%d-%s-00000000-0000-0000-0000-000000000000","host":"here","pid":%d,"acquiredAt":%q,"refreshedAt":%q}`,
			gone.Process.Pid, procscope.MachineTag(), gone.Process.Pid, time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("work"), Key: aws.String("aml/workspaces/w/lock.json"), Body: strings.NewReader(rec)}); err != nil {
			t.Fatal(err)
		}
	}
	if procscope.MachineTag() == "0" {
		t.Skip("this machine has no machine id (/etc/machine-id): a holder's liveness cannot be told")
	}
	deadLock()
	l, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true, EvaluationID: "next-run"})
	if err != nil {
		t.Fatalf("a lock whose holder is gone was not taken over at once: %v", err)
	}
	// A live holder: the conflict says who and what to do.
	_, err = st.Acquire(ctx, persist.StorageAcquireRequest{ID: "w", Lock: true, EvaluationID: "third"})
	var conflict *eval.WorkspaceConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("a live holder: %v, want a conflict", err)
	}
	for _, want := range []string{"s3://work/aml/workspaces/w/lock.json", "held by run next-run on host", fmt.Sprintf("(pid %d)", os.Getpid()), "held since", "last refreshed", "ago by the service's clock", "aml workspace unlock s3://work/aml/workspaces w"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the conflict does not say %q: %v", want, err)
		}
	}
	if _, err := st.Unlock(ctx, "w", false); !errors.Is(err, persist.ErrLockHeld) {
		t.Fatalf("unlocking a live holder's lock without force: %v", err)
	}
	holder, err := st.Unlock(ctx, "w", true)
	if err != nil || !strings.Contains(holder, "next-run") {
		t.Fatalf("unlocking with force: %q, %v", holder, err)
	}
	if err := l.(persist.LockChecker).CheckLock(ctx); !errors.Is(err, aws3.ErrLockLost) {
		t.Errorf("the holder of a removed lock: %v, want ErrLockLost", err)
	}
	_ = l.Release(ctx)
	deadLock()
	if holder, err := st.Unlock(ctx, "w", false); err != nil || !strings.Contains(holder, "killed-run") {
		t.Fatalf("unlocking a dead holder's lock: %q, %v", holder, err)
	}
	if _, err := st.Unlock(ctx, "w", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unlocking a workspace with no lock: %v", err)
	}
}
