// Package s3star binds the S3 workspace provider to Starlark:
// s3_workspace(), durable revisions in an S3 bucket.
//
// It lives outside package starlib because the AWS SDK brings its
// dependencies with it. Add Extension to starlib.LoadOptions.Extensions
// (the aml command does) to make the factory available.
package s3star

import (
	"slices"
	"time"

	"go.starlark.net/starlark"

	"github.com/aml-go/aml/providers/workspace/s3"
	"github.com/aml-go/aml/starlib"
	"github.com/aml-go/aml/starlib/persiststar"
)

// Extension adds s3_workspace() to workflows loaded with it
// (starlib.LoadOptions.Extensions).
var Extension = &starlib.Extension{
	Name:     "s3",
	Builtins: []*starlib.Builtin{s3WorkspaceBuiltin},
}

var s3WorkspaceBuiltin = &starlib.Builtin{
	Name:  "s3_workspace",
	Group: "providers",
	Doc: `Returns a workspace provider backed by revisions in an S3 bucket (AWS S3, or an S3-compatible service that honours conditional writes).

On first use of a service and bucket in a process, it checks with three small requests on a scratch key that the service honours the conditional writes it relies on, and refuses one that does not (aml workspace verify tells more). The layout is <prefix>/<id>/lock.json, workspace.json and revisions/. The writer lock is created with If-None-Match: *, refreshed every 5 minutes and taken over after 20 minutes without a refresh; revisions are uploaded create-if-absent and the index is published with If-Match, so a stale writer's save fails and says to reload. Credentials come from the standard AWS chain (environment, shared configuration and profile=, web identity, instance metadata), never from the workflow.`,
	Params: slices.Concat([]starlib.Param{
		{Name: "bucket", Type: "str", Doc: "The bucket."},
		{Name: "prefix", Type: "str", Default: `"` + s3.DefaultPrefix + `"`, Doc: "Key prefix of the workspaces."},
		persiststar.FormatParam,
		{Name: "region", Type: "str | None", Default: "None", Doc: "AWS region (default the configuration's)."},
		{Name: "endpoint", Type: "str | None", Default: "None", Doc: "URL of an S3-compatible service (R2, MinIO, SeaweedFS, ...)."},
		{Name: "force_path_style", Type: "bool", Default: "False", Doc: "Path-style addressing, which most S3-compatible services need."},
		{Name: "profile", Type: "str | None", Default: "None", Doc: "Shared-configuration profile of the credentials."},
	}, persiststar.ResourceParams, []starlib.Param{
		{Name: "request_timeout_ms", Type: "int | None", Default: "None", Positive: true, Doc: "How long a call of the service may go without progress (no answer, no byte moving), across its retries, before it fails with an error that names the endpoint (default 60000). A transfer that keeps moving is never cut."},
		{Name: "response_timeout_ms", Type: "int | None", Default: "None", Positive: true, Doc: "How long one attempt waits for the first byte of the answer, or a transfer for its next byte, before the request is tried again (default 10000; at most request_timeout_ms)."},
		{Name: "accept_lost_updates", Type: "bool", Default: "False", Doc: "Use a service that ignores conditional writes anyway. On first use of a service and bucket, aml checks that it honours them and refuses one that does not; with this set it does not check, and on such a service a stale writer's save can replace a newer revision without a word. Set it only for a store one writer uses."},
	}),
	Returns: "a workspace provider",
	Example: `configure(workspace_provider = s3_workspace(bucket = "my-team-workspaces", region = "eu-west-1"))`,
	Impl: func(c *starlib.Call) (starlark.Value, error) {
		opts, err := optionsOf(c)
		if err != nil {
			return nil, err
		}
		p, err := s3.New(opts)
		if err != nil {
			return nil, c.Errorf("%v", err)
		}
		return &starlib.WorkspaceProviderValue{Provider: p}, nil
	},
	// aml check decides what s3.New refuses before it loads anything.
	Rules: func(c *starlib.Call) error {
		opts, err := optionsOf(c)
		if err != nil {
			return err
		}
		if err := s3.CheckOptions(opts); err != nil {
			return c.Errorf("%v", err)
		}
		return nil
	},
}

// optionsOf reads the options of a call of s3_workspace().
func optionsOf(c *starlib.Call) (s3.Options, error) {
	opts := s3.Options{Bucket: c.Str("bucket"), Prefix: c.Str("prefix"), Region: c.Str("region"),
		Endpoint: c.Str("endpoint"), ForcePathStyle: c.Bool("force_path_style", false), Profile: c.Str("profile"),
		AcceptLostUpdates: c.Bool("accept_lost_updates", false)}
	var err error
	if opts.StoreOptions, err = persiststar.Options(c); err != nil {
		return opts, err
	}
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"request_timeout_ms", func(n int64) { opts.RequestTimeout = time.Duration(n) * time.Millisecond }},
		{"response_timeout_ms", func(n int64) { opts.ResponseTimeout = time.Duration(n) * time.Millisecond }},
	} {
		n, set, err := c.Int(f.name)
		if err != nil {
			return opts, err
		}
		if set {
			f.set(n) // positive: the catalog checked it
		}
	}
	return opts, nil
}
