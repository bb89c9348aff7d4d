package temporal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/providers/workspace/filesystem"
	"github.com/aml-go/aml/providers/workspace/persist"
	"github.com/aml-go/aml/temporal"
)

func stores(t *testing.T) map[string]persist.Storage {
	fs, err := filesystem.NewStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]persist.Storage{"memory": persist.NewMemoryStorage(), "filesystem": fs}
}

// TestBlobDriver: payloads round-trip through each store, the same
// payload is stored once, and a blob changed behind the driver's back, or
// a claim that pins nothing, is refused.
func TestBlobDriver(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			d, err := temporal.NewBlobDriver(st, "")
			if err != nil {
				t.Fatal(err)
			}
			big := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: bytes.Repeat([]byte("x"), 3<<20)}
			small := &commonpb.Payload{Data: []byte(`"small"`)}
			claims, err := d.Store(converter.StorageDriverStoreContext{Context: ctx}, []*commonpb.Payload{big, small, big})
			if err != nil {
				t.Fatal(err)
			}
			if len(claims) != 3 || claims[0].ClaimData["sha256"] != claims[2].ClaimData["sha256"] || claims[0].ClaimData["sha256"] == claims[1].ClaimData["sha256"] {
				t.Fatalf("claims %v", claims)
			}
			got, err := d.Retrieve(converter.StorageDriverRetrieveContext{Context: ctx}, claims)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []*commonpb.Payload{big, small, big} {
				if !proto.Equal(got[i], want) {
					t.Fatalf("payload %d did not round-trip", i)
				}
			}
			l, err := st.Acquire(ctx, persist.StorageAcquireRequest{ID: temporal.BlobNamespace})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			objs, err := l.List(ctx, "blobs/")
			if err != nil || len(objs) != 2 {
				t.Fatalf("stored objects %q, %v: want two blobs", objs, err)
			}
			// The path is the digest of what is stored there.
			for _, o := range objs {
				body, _, err := l.Read(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				buf.ReadFrom(body)
				body.Close()
				sum := sha256.Sum256(buf.Bytes())
				if o != "blobs/"+hex.EncodeToString(sum[:]) {
					t.Fatalf("object %s holds content of digest %x", o, sum)
				}
			}

			// Swap the small blob's content for another payload's.
			other, _ := proto.Marshal(&commonpb.Payload{Data: []byte(`"swapped"`)})
			if _, err := l.Write(ctx, "blobs/"+claims[1].ClaimData["sha256"], bytes.NewReader(other), persist.WriteOptions{ContentLength: int64(len(other))}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Retrieve(converter.StorageDriverRetrieveContext{Context: ctx}, claims[1:2]); err == nil || !strings.Contains(err.Error(), "damaged") {
				t.Fatalf("a swapped blob: %v", err)
			}
			bad := []converter.StorageDriverClaim{{ClaimData: map[string]string{"sha256": "../../etc/passwd", "size": "1"}}}
			if _, err := d.Retrieve(converter.StorageDriverRetrieveContext{Context: ctx}, bad); err == nil || !strings.Contains(err.Error(), "valid sha256") {
				t.Fatalf("a claim that pins nothing: %v", err)
			}
		})
	}
}

func echoLength(ctx workflow.Context, s string) (string, error) {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]) + " " + s[:10], nil
}

// TestBlobDriverOnServer: a 3 MB workflow input, above Temporal's 2 MB
// limit per payload, reaches the workflow through the blob store, and
// history holds only its claim.
func TestBlobDriverOnServer(t *testing.T) {
	srv := temporaltest.Start(t)
	st, err := filesystem.NewStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := temporal.NewBlobDriver(st, "")
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: temporaltest.Namespace, ExternalStorage: d.ExternalStorage(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, "blobs", worker.Options{})
	w.RegisterWorkflow(echoLength)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	input := strings.Repeat("0123456789", 300_000)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "blobs", TaskQueue: "blobs"}, echoLength, input)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(input))
	if out != hex.EncodeToString(sum[:])+" 0123456789" {
		t.Fatalf("the workflow saw another input: %q", out)
	}
	iter := c.GetWorkflowHistory(ctx, "blobs", run.GetRunID(), false, 0)
	size := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := proto.Marshal(ev)
		size += len(b)
	}
	if size > 64<<10 {
		t.Fatalf("history is %d bytes: the input was not kept out of it", size)
	}
	t.Logf("a %d-byte input; history %d bytes", len(input), size)
}
