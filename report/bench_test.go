package report

import (
	"io"
	"testing"
)

// BenchmarkWriteHTML10k measures the report of a 10,000-agent run (5,000
// siblings and a parallel() of 5,000) from a Collector that gathered it.
func BenchmarkWriteHTML10k(b *testing.B) {
	events := wideRun(b, 10_000)
	c := NewCollector(Options{Title: "wide.star"})
	for _, e := range events {
		if err := c.HandleTrace(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.WriteHTML(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollect10k measures folding the events of a 10,000-agent run
// into a Collector, as a live run does.
func BenchmarkCollect10k(b *testing.B) {
	events := wideRun(b, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		c := NewCollector(Options{})
		for _, e := range events {
			if err := c.HandleTrace(e); err != nil {
				b.Fatal(err)
			}
		}
	}
}
