package daytonadouble

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestValidateResponse checks that the response validation the double
// runs on its own answers catches what does not match the documents.
func TestValidateResponse(t *testing.T) {
	api, tool, err := specs()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(sp *spec, method, p string, status int, contentType, body string) error {
		t.Helper()
		r := httptest.NewRequest(method, p, nil)
		p = r.URL.Path
		route, params, err := sp.route(r, p)
		if err != nil {
			t.Errorf("%s %s: %v", method, p, err)
			return err
		}
		h := http.Header{}
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		return validateResponse(ctx, r, p, route, params, status, h, []byte(body))
	}
	sandbox := `{"id":"x","organizationId":"o","name":"x","user":"daytona","env":{},"labels":{},"public":false,"networkBlockAll":false,"target":"us","cpu":1,"gpu":0,"memory":1,"disk":3,"toolboxProxyUrl":"http://t","state":"started"}`
	for _, tc := range []struct {
		name        string
		sp          *spec
		method, p   string
		status      int
		contentType string
		body        string
		want        string // "" when valid
	}{
		{"sandbox", api, "GET", "/sandbox/x", 200, "application/json", sandbox, ""},
		{"sandbox without id", api, "GET", "/sandbox/x", 200, "application/json", strings.Replace(sandbox, `"id":"x",`, "", 1), `"id"`},
		{"unknown state", api, "GET", "/sandbox/x", 200, "application/json", strings.Replace(sandbox, `"started"`, `"running"`, 1), "state"},
		{"undeclared success", api, "GET", "/sandbox/x", 201, "application/json", sandbox, "status is not supported"},
		{"error answer", api, "GET", "/sandbox/x", 404, "application/json", `{"statusCode":404}`, ""},
		{"list without nextCursor", api, "GET", "/sandbox", 200, "application/json", `{"items":[]}`, "nextCursor"},
		{"exec answer", tool, "POST", "/process/session/s/exec", 202, "application/json", `{"cmdId":"c"}`, ""},
		{"exec answer without cmdId", tool, "POST", "/process/session/s/exec", 202, "application/json", `{}`, "cmdId"},
		{"session created", tool, "POST", "/process/session", 201, "", "", ""},
		{"session created as 200", tool, "POST", "/process/session", 200, "", "", "status is not supported"},
		{"download", tool, "GET", "/files/download?path=/x", 200, "application/octet-stream", "", ""},
		{"download as JSON", tool, "GET", "/files/download?path=/x", 200, "application/json", "{}", "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.sp, tc.method, tc.p, tc.status, tc.contentType, tc.body)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid response refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// TestFromLine reads the image of one-line Dockerfiles only.
func TestFromLine(t *testing.T) {
	for in, want := range map[string]string{
		"FROM alpine:3\n":          "alpine:3",
		"from a/b@sha256:00":       "a/b@sha256:00",
		"FROM a\nRUN x\n":          "",
		"FROM a AS b":              "",
		"RUN x":                    "",
		"FROM registry:5000/x/y:z": "registry:5000/x/y:z",
	} {
		if got, _ := fromLine(in); got != want {
			t.Errorf("fromLine(%q) = %q, want %q", in, got, want)
		}
	}
}
