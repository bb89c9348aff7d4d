package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
