package starlib

import (
	"context"
	"errors"
	"testing"

	"go.starlark.net/starlark"
)

// nested returns [[[...["leaf"]...]]] n levels deep.
func nested(n int) starlark.Value {
	var v starlark.Value = starlark.NewList([]starlark.Value{starlark.String("leaf")})
	for i := 0; i < n; i++ {
		v = starlark.NewList([]starlark.Value{v})
	}
	return v
}

// TestConvertDeepList: a list nested 10^5 levels converts without Go
// recursion, stops when its context is done, and a list that contains
// itself deep down is still found.
func TestConvertDeepList(t *testing.T) {
	r, err := toRenderable(nested(100_000), "value")
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for {
		l, ok := r.([]any)
		if !ok {
			break
		}
		depth++
		r = l[0]
	}
	if depth != 100_001 || r != "leaf" {
		t.Fatalf("depth %d, leaf %v", depth, r)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("operator stop")
	cancel(stop)
	if _, err := toRenderableCtx(ctx, nested(100_000), "value"); !errors.Is(err, stop) {
		t.Fatalf("cancelled conversion: %v", err)
	}

	inner := starlark.NewList(nil)
	var v starlark.Value = inner
	for i := 0; i < 10_000; i++ {
		v = starlark.NewList([]starlark.Value{v})
	}
	_ = inner.Append(v)
	if _, err := toRenderable(v, "value"); err == nil || !errors.Is(err, errUnrenderable) {
		t.Fatalf("deep cycle: %v", err)
	}
}

// BenchmarkConvertDeepList converts a list nested 10^5 levels deep: the
// time per op grows linearly with the depth.
func BenchmarkConvertDeepList(b *testing.B) {
	v := nested(100_000)
	for b.Loop() {
		if _, err := toRenderable(v, "value"); err != nil {
			b.Fatal(err)
		}
	}
}
