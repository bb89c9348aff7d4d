package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-go/aml/gateway"
)

// BenchmarkGateway measures what the gateway adds to one model call on
// loopback: the same call direct to the upstream and through a route,
// answered as JSON and as a stream of 20 events. p50-ms and p95-ms are
// the percentiles of the calls' latencies.
func BenchmarkGateway(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.URL.Path, "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 20 {
				fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"token %d \"}}]}\n\n", i)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":20}}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":1200,"completion_tokens":20}}`)
	}))
	defer upstream.Close()
	g, err := gateway.Start(gateway.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	base, remove, err := g.Route(upstream.URL+"/v1", &recorder{})
	if err != nil {
		b.Fatal(err)
	}
	defer remove()
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 4000) + `"}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, path := range []string{"/chat/completions", "/stream/chat/completions"} {
		for _, via := range []struct{ name, base string }{{"direct", upstream.URL + "/v1"}, {"gateway", base}} {
			b.Run(strings.TrimPrefix(strings.ReplaceAll(path, "/", "-"), "-")+"/"+via.name, func(b *testing.B) {
				var lat []time.Duration
				for b.Loop() {
					start := time.Now()
					resp, err := client.Post(via.base+path, "application/json", strings.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
			})
		}
	}
}

// BenchmarkGatewayStreams holds 500 streams open at once, each of 200
// events, direct and through the gateway, and reports the heap in use
// (clients, gateway and upstream in this process) while they all flow
// (heap-MB) and per stream (KB/stream): the difference is what the
// gateway keeps per stream, a line buffer whatever the stream's length.
func BenchmarkGatewayStreams(b *testing.B) {
	const streams, events = 500, 200
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"%s %d\"}}]}\n\n", strings.Repeat("x", 200), i)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond) // the upstream streams its events over time
		}
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	}))
	defer upstream.Close()
	g, err := gateway.Start(gateway.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	m := &recorder{}
	base, remove, err := g.Route(upstream.URL+"/v1", m)
	if err != nil {
		b.Fatal(err)
	}
	defer remove()
	for _, via := range []struct{ name, base string }{{"direct", upstream.URL + "/v1"}, {"gateway", base}} {
		b.Run(via.name, func(b *testing.B) { streamAll(b, via.base, streams, events) })
	}
}

// streamAll opens streams at once to base and reports the heap in use
// once all of them are halfway.
func streamAll(b *testing.B, base string, streams, events int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	var peak uint64
	for b.Loop() {
		var wg sync.WaitGroup
		half := make(chan struct{}, streams)
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Post(base+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
				if err != nil {
					b.Error(err)
					half <- struct{}{}
					return
				}
				defer resp.Body.Close()
				buf := make([]byte, 4096)
				read := 0
				for {
					n, err := resp.Body.Read(buf)
					read += n
					if read > events*100 && read-n <= events*100 {
						half <- struct{}{}
					}
					if err != nil {
						return
					}
				}
			}()
		}
		for range streams {
			<-half
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		wg.Wait()
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-MB")
	b.ReportMetric(float64(peak)/float64(streams)/1024, "KB/stream")
}
