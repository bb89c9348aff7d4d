package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-go/aml/internal/s3test"
)

// TestWorkspaceVerify: aml workspace verify against gofakes3 (served in
// process) prints the contract table and trusts it; a missing bucket
// fails.
func TestWorkspaceVerify(t *testing.T) {
	url, _ := s3test.Server(t, "work")
	s3test.SetEnv(t)
	var out, errOut bytes.Buffer
	if code := Main([]string{"workspace", "verify", "s3://work/teams", "--endpoint", url}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if op, rest, ok := strings.Cut(line, "  "); ok {
			rows[op] = strings.Join(strings.Fields(rest), " ")
		}
	}
	for op, want := range map[string]string{
		"PutObject If-None-Match: * on an existing key": "required honoured 412 Precondition Failed",
		"GetObject If-Match with a wrong ETag":          "optional ignored the request succeeded although its condition did not hold",
	} {
		if rows[op] != want {
			t.Errorf("row %q: %q, want %q\n%s", op, rows[op], want, out.String())
		}
	}
	if !strings.Contains(out.String(), "s3://work/teams: s3_workspace() can trust this service") {
		t.Errorf("no verdict:\n%s", out.String())
	}
	out.Reset()
	if code := Main([]string{"workspace", "verify", "--json", "--endpoint", url, "s3://work"}, nil, &out, &errOut); code != exitOK {
		t.Fatalf("--json: exit %d", code)
	}
	var rep struct {
		Trusted bool `json:"trusted"`
		Checks  []struct{ Operation, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.Trusted || len(rep.Checks) < 9 {
		t.Errorf("--json: %+v, %v\n%s", rep, err, out.String())
	}
	errOut.Reset()
	if code := Main([]string{"workspace", "verify", "s3://nosuch-bucket", "--endpoint", url}, nil, &out, &errOut); code != exitFailure || !strings.Contains(errOut.String(), "does not exist") {
		t.Errorf("a missing bucket: exit %d, %s", code, errOut.String())
	}
	if code := Main([]string{"workspace", "verify", "work"}, nil, &out, &errOut); code != exitUsage {
		t.Errorf("an argument that is not s3://: exit %d", code)
	}
}
