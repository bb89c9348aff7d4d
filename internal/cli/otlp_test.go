package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestRunExportsOTLP runs aml run in-process against a real OTLP/HTTP
// receiver on loopback and checks the exported spans, with the endpoint
// from the flag and from OTEL_EXPORTER_OTLP_ENDPOINT.
func TestRunExportsOTLP(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
		attrs = map[string]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names = append(names, sp.Name)
					for _, a := range sp.Attributes {
						attrs[a.Key] = true
					}
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()

	dir := t.TempDir()
	wf := filepath.Join(dir, "hello.star")
	src := "echo = deterministic_agent(respond = lambda req: \"Resolved: \" + req.prompt)\n\ndef main():\n    return agent(\"secret prompt\", provider = echo)\n"
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, viaEnv := range []bool{false, true} {
		mu.Lock()
		names, attrs = nil, map[string]bool{}
		mu.Unlock()
		args := []string{"run", "--quiet", wf}
		if viaEnv {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		} else {
			args = []string{"run", "--quiet", "--otlp-endpoint", srv.URL, wf}
		}
		var stdout, stderr bytes.Buffer
		if code := Main(args, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if stdout.String() != "Resolved: secret prompt\n" {
			t.Fatalf("stdout %q", stdout.String())
		}
		mu.Lock()
		got := map[string]int{}
		for _, n := range names {
			got[n]++
		}
		if got["run"] != 1 || got["main"] != 1 || got["Agent"] != 1 || got["agent.session"] != 1 {
			t.Errorf("viaEnv=%v: exported spans %v", viaEnv, names)
		}
		if !attrs["aml.source"] || attrs["prompt"] {
			t.Errorf("viaEnv=%v: attributes %v (want aml.source, no prompt without --capture-content)", viaEnv, attrs)
		}
		mu.Unlock()
	}
}
