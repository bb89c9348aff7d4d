package journal

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// benchResult is a result of about 100 bytes.
var benchResult = `{"text":"` + strings.Repeat("lorem ipsum ", 7) + `done."}`

func BenchmarkRecord(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "record"
		if sync {
			name = "record+sync"
		}
		b.Run(name, func(b *testing.B) {
			r := mustCreate(b, b.TempDir())
			defer r.Close()
			e := agentEffect(0, benchResult)
			line, err := appendEffect(nil, e, r.meta.Started.UnixMilli())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Record(e); err != nil {
					b.Fatal(err)
				}
				if sync {
					if err := r.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkEffectSize reports a typical agent effect's record size.
func BenchmarkEffectSize(b *testing.B) {
	e := agentEffect(2, benchResult)
	var n int
	for b.Loop() {
		line, err := appendEffect(nil, e, testMeta().Started.UnixMilli())
		if err != nil {
			b.Fatal(err)
		}
		n = len(line)
	}
	b.ReportMetric(float64(n), "bytes/effect")
	b.ReportMetric(float64(n-len(benchResult)), "overhead-bytes/effect")
}

func BenchmarkOpen10k(b *testing.B) {
	dir := b.TempDir()
	r := mustCreate(b, dir)
	for i := range 10000 {
		if err := r.Record(agentEffect(i, benchResult)); err != nil {
			b.Fatal(err)
		}
	}
	mustClose(b, r)
	fi, err := os.Stat(logPath(dir, r.ID()))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		o, err := Open(dir, r.ID())
		if err != nil {
			b.Fatal(err)
		}
		if n := len(o.Effects()); n != 10000 {
			b.Fatal(fmt.Sprint(n, " effects"))
		}
		o.Close()
	}
}

func BenchmarkList10k(b *testing.B) {
	dir := b.TempDir()
	r := mustCreate(b, dir)
	for i := range 10000 {
		if err := r.Record(agentEffect(i, benchResult)); err != nil {
			b.Fatal(err)
		}
	}
	mustClose(b, r)
	b.ReportAllocs()
	for b.Loop() {
		sums, err := List(dir)
		if err != nil || len(sums) != 1 || sums[0].Effects != 10000 {
			b.Fatal(sums, err)
		}
	}
}

func BenchmarkCreateClose(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		r, err := Create(dir, Meta{Workflow: "bench.star"})
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}
