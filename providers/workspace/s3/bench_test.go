package s3_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-go/aml/eval"
	wsfs "github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/providers/workspace/persist"
	aws3 "github.com/aml-go/aml/providers/workspace/s3"
)

// benchSaveLoad saves a 1,000-file, 50 MB tree to p and loads it back,
// b.N times.
func benchSaveLoad(b *testing.B, p eval.WorkspaceProvider) {
	ctx := context.Background()
	chunk := make([]byte, 50<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("w%d", i)
		l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: id, Lock: true, Load: &eval.WorkspaceLoad{}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for f := range 1000 {
			dir := filepath.Join(l.Directory(), fmt.Sprint(f%20))
			_ = os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.bin", f)), chunk, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: *eval.DefaultSavePolicy(), Outcome: "success"}); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: id, Load: &eval.WorkspaceLoad{Revision: "current"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveLoad: the same tree through the S3 workspace (gofakes3 in
// process) and the filesystem workspace, in both formats.
func BenchmarkSaveLoad(b *testing.B) {
	for _, format := range []string{"archive", "folder"} {
		b.Run("s3-"+format, func(b *testing.B) {
			p, err := aws3.New(aws3.Options{Client: fake(b, "work"), Bucket: "work", StoreOptions: persist.StoreOptions{Format: format}})
			if err != nil {
				b.Fatal(err)
			}
			benchSaveLoad(b, p)
		})
		b.Run("filesystem-"+format, func(b *testing.B) {
			p, err := wsfs.New(wsfs.Options{Directory: b.TempDir(), StoreOptions: persist.StoreOptions{Format: format}})
			if err != nil {
				b.Fatal(err)
			}
			benchSaveLoad(b, p)
		})
	}
}

// BenchmarkConditionsCheck: the check of conditional writes that the
// first acquisition of a service and bucket makes (gofakes3 in process).
func BenchmarkConditionsCheck(b *testing.B) {
	st, err := aws3.NewStorage(aws3.Options{Client: fake(b, "work"), Bucket: "work"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if ignored, err := st.ProbeConditions(ctx); err != nil || ignored != "" {
			b.Fatalf("probe: %q, %v", ignored, err)
		}
	}
}

// BenchmarkCheck: aml workspace check of a 1,000-file, 50 MB workspace
// with 3 revisions (gofakes3 in process), listing sizes and with
// --read-data.
func BenchmarkCheck(b *testing.B) {
	for _, format := range []string{"archive", "folder"} {
		cli := fake(b, "work")
		st, err := aws3.NewStorage(aws3.Options{Client: cli, Bucket: "work", StoreOptions: persist.StoreOptions{Format: format}})
		if err != nil {
			b.Fatal(err)
		}
		p, err := aws3.New(aws3.Options{Client: cli, Bucket: "work", StoreOptions: persist.StoreOptions{Format: format}})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		chunk := make([]byte, 50<<10)
		for i := range chunk {
			chunk[i] = byte(i * 7)
		}
		for rev := range 3 {
			l, err := p.Acquire(ctx, &eval.WorkspaceAcquireRequest{ID: "w", Lock: true, Load: &eval.WorkspaceLoad{Revision: "current"}})
			if err != nil {
				b.Fatal(err)
			}
			for f := range 1000 {
				dir := filepath.Join(l.Directory(), fmt.Sprint(f%20))
				_ = os.MkdirAll(dir, 0o755)
				chunk[0] = byte(rev)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.bin", f)), chunk, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Save(ctx, eval.WorkspaceSaveRequest{SavePolicy: eval.SavePolicy{Retention: 3}, Outcome: "success"}); err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		for _, readData := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/read-data=%v", format, readData), func(b *testing.B) {
				for b.Loop() {
					res, err := persist.Check(ctx, st, []string{"w"}, persist.CheckOptions{ReadData: readData})
					if err != nil || len(res) != 1 || !res[0].OK() || res[0].Revisions != 3 {
						b.Fatalf("check: %+v, %v", res, err)
					}
				}
			})
		}
	}
}
