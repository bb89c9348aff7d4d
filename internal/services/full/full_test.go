package full

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/providers/sandbox/docker"
	s3ws "github.com/aml-go/aml/providers/workspace/s3"
	"github.com/aml-go/aml/starlib"
)

// TestBuiltinsNameTheExtensions holds services.Builtins (which aml
// scans workflows for, to run aml-full in its place) to the builtins
// the extensions add: a builtin missing from the list would reach a
// stand-in in aml.
func TestBuiltinsNameTheExtensions(t *testing.T) {
	var got []string
	for _, ext := range Linked.Extensions(services.ExtensionOptions{}) {
		for _, b := range ext.Builtins {
			got = append(got, b.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, services.Builtins) {
		t.Errorf("the extensions add %q; services.Builtins lists %q", got, services.Builtins)
	}
	core := map[string]bool{}
	for _, b := range starlib.Catalog() {
		core[b.Name] = true
	}
	for _, n := range got {
		if core[n] {
			t.Errorf("%s is in the core catalog too", n)
		}
	}
}

// TestSetComplete: a Set with a nil function would make aml-full fail
// where aml would have run it.
func TestSetComplete(t *testing.T) {
	v := reflect.ValueOf(Linked)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("Linked.%s is nil", v.Type().Field(i).Name)
		}
	}
	if !Linked.Linked() {
		t.Error("Linked.Linked() is false")
	}
}

// TestTypesKeepTheirJSON: the command prints the services' results as
// JSON (aml sandbox prune --json, aml workspace verify --json); the
// contract's types must encode as the providers' own did.
func TestTypesKeepTheirJSON(t *testing.T) {
	l := docker.Leftover{ID: "c1", Name: "aml-x", Run: "r1", Owner: "host:1:2"}
	res := docker.PruneResult{Removed: []docker.Leftover{l}, Busy: []docker.Leftover{}, Foreign: nil}
	conv := services.ContainerPrune{Removed: containers(res.Removed), Busy: containers(res.Busy), Foreign: containers(res.Foreign)}
	same(t, res, conv)
	rep := s3ws.Report{Bucket: "b", Prefix: "p", Trusted: true, Checks: []s3ws.Check{{Operation: "PutObject", Required: true, Result: "honoured", Detail: "d"}, {Operation: "Get", Result: "ignored"}}}
	out := services.S3Report{Bucket: rep.Bucket, Prefix: rep.Prefix, Trusted: rep.Trusted}
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, services.S3Check(c))
	}
	same(t, rep, out)
}

func same(t *testing.T, want, got any) {
	t.Helper()
	a, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("JSON differs:\nprovider: %s\ncontract: %s", a, b)
	}
}

// TestClassify: the S3 failures keep their error codes through wrapping.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want services.Failure
	}{
		{fmt.Errorf("save: %w", s3ws.ErrUntrusted), services.S3Untrusted},
		{fmt.Errorf("save: %w", s3ws.ErrLockLost), services.S3LockLost},
		{errors.New("other"), services.NoFailure},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestNoEngine: the error of a prune without an engine says so to
// errors.Is and keeps the client's text.
func TestNoEngine(t *testing.T) {
	inner := errors.New("Cannot connect to the Docker daemon")
	err := error(noEngine{inner})
	if !errors.Is(err, services.ErrNoEngine) || !errors.Is(err, inner) || err.Error() != inner.Error() {
		t.Errorf("noEngine: Is(ErrNoEngine)=%v Is(inner)=%v text %q", errors.Is(err, services.ErrNoEngine), errors.Is(err, inner), err)
	}
}
