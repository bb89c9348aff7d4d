package s3

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
)

// Check outcomes.
const (
	// Honoured: the service behaves as the protocol needs.
	Honoured = "honoured"
	// Ignored: the service accepted a request whose condition did not
	// hold.
	Ignored = "ignored"
	// Failed: the request failed in another way.
	Failed = "failed"
)

// Check is one operation of the protocol contract tried against a
// bucket.
type Check struct {
	Operation string `json:"operation"`
	// Required checks must be honoured for AML to trust the service; the
	// others make it more robust (gofakes3 ignores conditional GET and
	// DELETE, which AML does not rely on).
	Required bool   `json:"required"`
	Result   string `json:"result"`
	Detail   string `json:"detail,omitempty"`
}

// Report is the outcome of Verify.
type Report struct {
	Bucket string  `json:"bucket"`
	Prefix string  `json:"prefix"`
	Checks []Check `json:"checks"`
	// Trusted is true when every required check was honoured.
	Trusted bool `json:"trusted"`
}

// Verify runs the S3 workspace's protocol contract against a bucket:
// GetObject with a streaming body and a stable ETag, PutObject with
// If-None-Match: * (also under a race of concurrent writers) and with
// If-Match, conditional GET and DELETE, DeleteObject, and ListObjectsV2
// with continuation. It works below <prefix>/.aml-verify-<uuid>/ and
// removes what it wrote. An error means the checks could not run at all
// (no bucket, no access).
func Verify(ctx context.Context, cli *s3.Client, bucket, prefix string) (*Report, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		prefix = DefaultPrefix
	}
	base := prefix + "/.aml-verify-" + uuid.NewString() + "/"
	rep := &Report{Bucket: bucket, Prefix: prefix}
	st := &Storage{cli: cli, bucket: bucket, prefix: prefix}
	var written []string
	put := func(key, body string, mutate func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + key), Body: strings.NewReader(body), ContentLength: aws.Int64(int64(len(body)))}
		if mutate != nil {
			mutate(in)
		}
		out, err := cli.PutObject(ctx, in)
		if err == nil {
			written = append(written, base+key)
		}
		return out, err
	}
	defer func() {
		for _, k := range written {
			_, _ = cli.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		}
	}()
	add := func(op string, required bool, result, detail string) {
		rep.Checks = append(rep.Checks, Check{Operation: op, Required: required, Result: result, Detail: detail})
	}
	conditional := func(op string, required bool, err error) {
		switch {
		case preconditionFailed(err):
			add(op, required, Honoured, "412 Precondition Failed")
		case err == nil:
			add(op, required, Ignored, "the request succeeded although its condition did not hold")
		default:
			add(op, required, Failed, err.Error())
		}
	}

	first, err := put("object", "one", nil)
	if err != nil {
		return nil, st.wrap("writing a probe object", base+"object", err)
	}
	etag := aws.ToString(first.ETag)
	get, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "object")})
	switch {
	case err != nil:
		add("GetObject with a streaming body and ETag", true, Failed, err.Error())
	default:
		body, rerr := io.ReadAll(get.Body)
		get.Body.Close()
		switch got := aws.ToString(get.ETag); {
		case rerr != nil || string(body) != "one":
			add("GetObject with a streaming body and ETag", true, Failed, fmt.Sprintf("read %q, %v", body, rerr))
		case got == "" || etag == "":
			add("GetObject with a streaming body and ETag", true, Failed, "no ETag")
		case got != etag:
			add("GetObject with a streaming body and ETag", true, Failed, fmt.Sprintf("stable ETags: PUT gave %s, GET %s", etag, got))
		default:
			add("GetObject with a streaming body and ETag", true, Honoured, "ETag "+etag)
		}
	}

	_, err = put("object", "two", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
	conditional("PutObject If-None-Match: * on an existing key", true, err)
	if _, err := put("fresh", "x", func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }); err != nil {
		add("PutObject If-None-Match: * on a new key", true, Failed, err.Error())
	} else {
		add("PutObject If-None-Match: * on a new key", true, Honoured, "created")
	}
	_, err = put("object", "three", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(`"0000000000000000"`) })
	conditional("PutObject If-Match with a wrong ETag", true, err)
	if out, err := put("object", "four", func(in *s3.PutObjectInput) { in.IfMatch = aws.String(etag) }); err != nil {
		add("PutObject If-Match with the current ETag", true, Failed, err.Error())
	} else {
		add("PutObject If-Match with the current ETag", true, Honoured, "replaced")
		etag = aws.ToString(out.ETag)
	}

	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "race"), Body: strings.NewReader("r"),
				ContentLength: aws.Int64(1), IfNoneMatch: aws.String("*")}); err == nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	written = append(written, base+"race")
	if n := wins.Load(); n == 1 {
		add("10 concurrent PutObject If-None-Match: * on one key", true, Honoured, "exactly one succeeded")
	} else {
		add("10 concurrent PutObject If-None-Match: * on one key", true, Failed, fmt.Sprintf("%d succeeded: creation is not atomic, two writers could both take a lock", n))
	}

	// The conditional writes a save also uses: a multipart upload
	// completed only if absent, a server-side copy created only if
	// absent. Saves write revisions under fresh random names, so these
	// conditions guard against what cannot collide: they are reported,
	// not required.
	if _, err := put("multipart", "exists", nil); err != nil {
		add("CompleteMultipartUpload If-None-Match: * on an existing key", false, Failed, err.Error())
	} else {
		conditional("CompleteMultipartUpload If-None-Match: * on an existing key", false, completeOnto(ctx, cli, bucket, base+"multipart"))
	}
	_, err = cli.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "fresh"),
		CopySource: aws.String(bucket + "/" + base + "object"), IfNoneMatch: aws.String("*")})
	conditional("CopyObject If-None-Match: * onto an existing key", false, err)

	g, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "object"), IfMatch: aws.String(`"0000000000000000"`)})
	if err == nil {
		g.Body.Close()
	}
	conditional("GetObject If-Match with a wrong ETag", false, err)
	_, err = cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "fresh"), IfMatch: aws.String(`"0000000000000000"`)})
	conditional("DeleteObject If-Match with a wrong ETag", false, err)
	if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "object")}); err != nil {
		add("DeleteObject", true, Failed, err.Error())
	} else if _, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(base + "object")}); err == nil || !notFound(err) {
		add("DeleteObject", true, Failed, "the object is still there")
	} else {
		add("DeleteObject", true, Honoured, "removed")
	}

	for i := range 3 {
		if _, err := put(fmt.Sprintf("list/%d", i), "l", nil); err != nil {
			return nil, st.wrap("writing a probe object", base+"list", err)
		}
	}
	var keys []string
	pages := s3.NewListObjectsV2Paginator(cli, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(base + "list/"), MaxKeys: aws.Int32(1)})
	var lerr error
	for pages.HasMorePages() && len(keys) < 10 {
		page, err := pages.NextPage(ctx)
		if err != nil {
			lerr = err
			break
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	switch {
	case lerr != nil:
		add("ListObjectsV2 with continuation tokens", true, Failed, lerr.Error())
	case len(keys) != 3:
		add("ListObjectsV2 with continuation tokens", true, Failed, fmt.Sprintf("listed %d of 3 objects one page at a time", len(keys)))
	default:
		add("ListObjectsV2 with continuation tokens", true, Honoured, "3 objects in 3 pages")
	}

	rep.Trusted = true
	for _, c := range rep.Checks {
		if c.Required && c.Result != Honoured {
			rep.Trusted = false
		}
	}
	return rep, nil
}

// completeOnto uploads one part to key, which exists, and completes the
// upload with If-None-Match: *; it returns the completion's error (nil
// when the service ignored the condition) and aborts the upload.
func completeOnto(ctx context.Context, cli *s3.Client, bucket, key string) error {
	up, err := cli.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return err
	}
	defer cli.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId})
	part, err := cli.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part"), ContentLength: aws.Int64(4)})
	if err != nil {
		return err
	}
	_, err = cli.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}, IfNoneMatch: aws.String("*")})
	return err
}
