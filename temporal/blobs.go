package temporal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/aml-go/aml/providers/workspace/persist"
)

// DefaultBlobThreshold is the serialized size from which a payload is kept
// in the blob store instead of history: Temporal's own default, 256 KiB,
// well under its 2 MB limit per payload.
const DefaultBlobThreshold = 256 << 10

// MaxBlobBytes bounds one blob read back: what a run may carry as one
// payload (a bundle, a prompt, a result).
const MaxBlobBytes = 1 << 30

// BlobNamespace is the namespace (the "workspace id") of a store in which a
// BlobDriver keeps its blobs, under blobs/<sha256>.
const BlobNamespace = "temporal-blobs"

// BlobDriver is a converter.StorageDriver that keeps Temporal payloads in
// one of AML's stores (persist.Storage: a directory for one machine, an S3
// prefix for a fleet). Blobs are content-addressed: a payload is stored
// once under the SHA-256 of its serialized form, created only if absent,
// and its claim in history names that digest and its size; Retrieve
// refuses content that does not match them. Nothing is ever overwritten
// or deleted by the driver, so a blob outlives every history that names it.
// Give it a store of its own (not a workspace store). A BlobDriver is safe
// for concurrent use.
type BlobDriver struct {
	storage persist.Storage
	name    string
}

// NewBlobDriver returns a driver over storage; name is its stable name in
// history (empty means "aml-blobs"): every worker and client of a
// namespace must use the same name and the same store.
func NewBlobDriver(storage persist.Storage, name string) (*BlobDriver, error) {
	if storage == nil {
		return nil, errors.New("temporal blob driver: no store")
	}
	if name == "" {
		name = "aml-blobs"
	}
	return &BlobDriver{storage: storage, name: name}, nil
}

// ExternalStorage returns the client option that sends payloads of at
// least threshold bytes (DefaultBlobThreshold when 0) to d.
func (d *BlobDriver) ExternalStorage(threshold int) converter.ExternalStorage {
	if threshold <= 0 {
		threshold = DefaultBlobThreshold
	}
	return converter.ExternalStorage{Drivers: []converter.StorageDriver{d}, PayloadSizeThreshold: threshold}
}

// Name implements converter.StorageDriver.
func (d *BlobDriver) Name() string { return d.name }

// Type implements converter.StorageDriver.
func (d *BlobDriver) Type() string { return "aml.store" }

func blobPath(digest string) string { return "blobs/" + digest }

func (d *BlobDriver) lease(ctx context.Context) (persist.StorageLease, error) {
	l, err := d.storage.Acquire(ctx, persist.StorageAcquireRequest{ID: BlobNamespace})
	if err != nil {
		return nil, fmt.Errorf("temporal blob store %s: %w", d.storage.Name(), err)
	}
	return l, nil
}

// Store implements converter.StorageDriver.
func (d *BlobDriver) Store(sctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	ctx := orBackground(sctx.Context)
	l, err := d.lease(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	claims := make([]converter.StorageDriverClaim, len(payloads))
	for i, p := range payloads {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("temporal blob store: serialize a payload: %w", err)
		}
		sum := sha256.Sum256(data)
		digest := hex.EncodeToString(sum[:])
		_, err = l.Write(ctx, blobPath(digest), bytes.NewReader(data), persist.WriteOptions{Condition: persist.Absent, ContentLength: int64(len(data)), ContentType: "application/x-protobuf"})
		if err != nil && !errors.Is(err, persist.ErrPreconditionFailed) {
			// Present already means stored: the path is the content's digest.
			return nil, fmt.Errorf("temporal blob store: store blob %s (%d bytes): %w", digest, len(data), err)
		}
		claims[i] = converter.StorageDriverClaim{ClaimData: map[string]string{"sha256": digest, "size": strconv.Itoa(len(data))}}
	}
	return claims, nil
}

// Retrieve implements converter.StorageDriver.
func (d *BlobDriver) Retrieve(rctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	ctx := orBackground(rctx.Context)
	l, err := d.lease(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	out := make([]*commonpb.Payload, len(claims))
	for i, c := range claims {
		digest := c.ClaimData["sha256"]
		size, err := strconv.ParseInt(c.ClaimData["size"], 10, 64)
		if _, derr := hex.DecodeString(digest); derr != nil || len(digest) != 64 || err != nil || size < 0 || size > MaxBlobBytes {
			return nil, fmt.Errorf("temporal blob store: a claim without a valid sha256 and size: %v", c.ClaimData)
		}
		data, err := readBlob(ctx, l, digest, size)
		if err != nil {
			return nil, err
		}
		p := &commonpb.Payload{}
		if err := proto.Unmarshal(data, p); err != nil {
			return nil, fmt.Errorf("temporal blob store: blob %s is not a payload: %w", digest, err)
		}
		out[i] = p
	}
	return out, nil
}

func readBlob(ctx context.Context, l persist.StorageLease, digest string, size int64) ([]byte, error) {
	body, _, err := l.Read(ctx, blobPath(digest))
	if err != nil {
		return nil, fmt.Errorf("temporal blob store: read blob %s: %w", digest, err)
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		return nil, fmt.Errorf("temporal blob store: read blob %s: %w", digest, err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != size || hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("temporal blob store: blob %s is damaged: %d bytes that do not match the digest and size (%d bytes) its claim pins", digest, len(data), size)
	}
	return data, nil
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

var _ converter.StorageDriver = (*BlobDriver)(nil)
