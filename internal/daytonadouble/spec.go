package daytonadouble

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The published descriptions of Daytona's REST API (daytonaio/daytona at
// tag v0.190.0, Apache-2.0: openapi/LICENSE): the control plane and the
// toolbox of one sandbox.
var (
	//go:embed openapi/api.openapi.yaml
	apiYAML []byte
	//go:embed openapi/toolbox.openapi.yaml
	toolboxYAML []byte
)

// spec is one loaded OpenAPI document and its router.
type spec struct {
	name   string
	doc    *openapi3.T
	router routers.Router
}

var (
	specsOnce           sync.Once
	apiSpec, toolSpec   *spec
	specsErr            error
	errSecurityNotBeare = errors.New("the request has no Authorization: Bearer <token> header")
)

// specs loads both documents once per process.
func specs() (*spec, *spec, error) {
	specsOnce.Do(func() {
		apiSpec, specsErr = loadSpec("control plane", apiYAML)
		if specsErr == nil {
			toolSpec, specsErr = loadSpec("toolbox", toolboxYAML)
		}
	})
	return apiSpec, toolSpec, specsErr
}

func loadSpec(name string, data []byte) (*spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loading the %s OpenAPI document: %w", name, err)
	}
	// The published examples do not all match their schemas (a Sandbox
	// example has buildInfo: ""); the schemas are what is checked.
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("the %s OpenAPI document is invalid: %w", name, err)
	}
	// Requests are matched by path alone: the double serves the control
	// plane under /api and each toolbox under /toolbox/{sandboxId}, and
	// strips those prefixes before routing.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing the %s OpenAPI document: %w", name, err)
	}
	return &spec{name: name, doc: doc, router: router}, nil
}

// bearerAuth checks the shape of the credentials an operation's security
// requirement names: an HTTP bearer token (the control plane), an API key
// header (the toolbox). OpenID Connect is never what a client of ours
// presents.
func bearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"),
		s.Type == "apiKey" && s.In == "header" && strings.EqualFold(s.Name, "Authorization"):
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && strings.TrimSpace(tok) != "" {
			return nil
		}
		return errSecurityNotBeare
	}
	return fmt.Errorf("security scheme %q is not offered by this double", in.SecuritySchemeName)
}

// route finds the operation of a request whose path has had its prefix
// stripped.
func (s *spec) route(r *http.Request, p string) (*routers.Route, map[string]string, error) {
	u := *r.URL
	u.Path, u.RawPath = p, ""
	if esc := (&url.URL{Path: p}).EscapedPath(); esc != p {
		u.RawPath = esc
	}
	rr := r.Clone(r.Context())
	rr.URL = &u
	rr.Host = ""
	return s.router.FindRoute(rr)
}

// validateRequest checks a request, whose body is body (nil: none read),
// against its operation.
func validateRequest(ctx context.Context, r *http.Request, p string, route *routers.Route, params map[string]string, body []byte, excludeBody bool) error {
	rr := r.Clone(ctx)
	u := *r.URL
	u.Path, u.RawPath = p, ""
	rr.URL = &u
	if body != nil {
		rr.Body = io.NopCloser(bytes.NewReader(body))
		rr.ContentLength = int64(len(body))
	} else {
		rr.Body = http.NoBody
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    rr,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:                bearerAuth,
			MultiError:                        true,
			ExcludeRequestBody:                excludeBody,
			RejectWhenRequestBodyNotSpecified: true,
		},
	}
	return openapi3filter.ValidateRequest(ctx, in)
}

// validateResponse checks a response, of which body holds what was sent
// (a prefix of it when truncated), against the operation.
func validateResponse(ctx context.Context, r *http.Request, p string, route *routers.Route, params map[string]string, status int, header http.Header, body []byte) error {
	rr := r.Clone(ctx)
	u := *r.URL
	u.Path, u.RawPath = p, ""
	rr.URL = &u
	rr.Body = http.NoBody
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: rr, PathParams: params, Route: route,
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			MultiError: true,
			// A success the operation does not declare is a mismatch; the
			// service's error answers (401, 404, 429...) are mostly not
			// described and are checked by the client's tests instead.
			IncludeResponseStatus: status < 400,
		},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(ctx, in)
}
