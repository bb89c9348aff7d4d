package filesystem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aml-go/aml/eval"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/providers/workspace/persist/persisttest"
)

// The benchmark tree: 1,000 files in 10 directories, 50 MiB in all, of
// pseudo-random (incompressible) content.
const (
	benchFiles     = 1000
	benchTreeBytes = 50 << 20
)

var benchTree = sync.OnceValue(func() persisttest.Tree {
	t := persisttest.Tree{}
	rng := rand.NewChaCha8([32]byte{42})
	size := benchTreeBytes / benchFiles
	for i := range benchFiles {
		dir := fmt.Sprintf("pkg%02d", i%10)
		t[dir] = persisttest.File{Dir: true, Mode: 0o755}
		n := size
		if i == 0 {
			n += benchTreeBytes - size*benchFiles
		}
		buf := make([]byte, n)
		rng.Read(buf)
		t[fmt.Sprintf("%s/file%04d.bin", dir, i)] = persisttest.File{Data: string(buf), Mode: 0o644}
	}
	return t
})

type benchEnv struct {
	store    *persisttest.CountingStorage
	provider eval.WorkspaceProvider
}

func newBenchEnv(b *testing.B, format string) *benchEnv {
	s, err := NewStorage(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	store := persisttest.NewCountingStorage(s)
	return &benchEnv{store: store, provider: persist.New(store, persist.Options{StoreOptions: persist.StoreOptions{Format: format, TemporaryDirectory: b.TempDir()}})}
}

func (e *benchEnv) acquire(b *testing.B, id string, load *eval.WorkspaceLoad) eval.WorkspaceLease {
	l, err := e.provider.Acquire(context.Background(), &eval.WorkspaceAcquireRequest{ID: id, Lock: true, Load: load})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func (e *benchEnv) save(b *testing.B, l eval.WorkspaceLease) {
	if err := l.Save(context.Background(), eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: 1}}); err != nil {
		b.Fatal(err)
	}
}

func (e *benchEnv) release(b *testing.B, l eval.WorkspaceLease) {
	if err := l.Release(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSaveLoad1000Files50MB measures, per format: a full save of the
// tree into a new workspace (save), an acquisition that materializes it
// (load), and a second save of the unchanged tree on the same lease
// (resave-unchanged), reporting the body bytes written to storage per save
// (stored-bytes/op) and the in-store copies (copies/op): the folder format
// writes only its manifest and the index, the archive format rewrites the
// archive.
func BenchmarkSaveLoad1000Files50MB(b *testing.B) {
	tree := benchTree()
	ctx := context.Background()
	for _, format := range persisttest.Formats {
		b.Run(format+"/save", func(b *testing.B) {
			e := newBenchEnv(b, format)
			b.SetBytes(benchTreeBytes)
			var stored int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				id := fmt.Sprint("save-", i)
				l := e.acquire(b, id, nil)
				persisttest.WriteTree(b, l.Directory(), tree)
				e.store.Reset()
				b.StartTimer()
				e.save(b, l)
				b.StopTimer()
				stored += e.store.BytesWritten()
				e.release(b, l)
				dir, _ := e.store.Storage.(*Storage).WorkspaceDirectory(id)
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(stored)/float64(b.N), "stored-bytes/op")
		})
		b.Run(format+"/load", func(b *testing.B) {
			e := newBenchEnv(b, format)
			l := e.acquire(b, "ws", nil)
			persisttest.WriteTree(b, l.Directory(), tree)
			e.save(b, l)
			e.release(b, l)
			b.SetBytes(benchTreeBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l := e.acquire(b, "ws", &eval.WorkspaceLoad{Revision: "current"})
				b.StopTimer()
				if i == 0 {
					if d := persisttest.DiffTrees(tree, persisttest.ReadTree(b, l.Directory())); d != "" {
						b.Fatal(d)
					}
				}
				e.release(b, l)
				b.StartTimer()
			}
		})
		b.Run(format+"/resave-unchanged", func(b *testing.B) {
			e := newBenchEnv(b, format)
			l := e.acquire(b, "ws", nil)
			persisttest.WriteTree(b, l.Directory(), tree)
			e.save(b, l)
			e.store.Reset()
			b.SetBytes(benchTreeBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.Save(ctx, eval.WorkspaceSaveRequest{Outcome: "success", SavePolicy: eval.SavePolicy{Retention: 1}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(e.store.BytesWritten())/float64(b.N), "stored-bytes/op")
			b.ReportMetric(float64(e.store.Copies())/float64(b.N), "copies/op")
			if format == persist.FormatFolder && e.store.BytesWritten()/int64(b.N) > 1<<20 {
				b.Fatalf("unchanged folder save wrote %d bytes", e.store.BytesWritten()/int64(b.N))
			}
			e.release(b, l)
		})
	}
}
