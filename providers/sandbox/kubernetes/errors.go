package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrPodGone is wrapped by the error of a command, or of a transfer,
// whose pod was deleted or evicted, or stopped, while it ran.
var ErrPodGone = errors.New("the sandbox's pod is gone")

// ErrUnreachable is wrapped when the API server refused the connection,
// could not be reached, or did not answer within the bound.
var ErrUnreachable = errors.New("the Kubernetes API server cannot be reached")

// ErrNotInstalled is wrapped when the cluster does not serve the
// agent-sandbox resources.
var ErrNotInstalled = errors.New("agent-sandbox is not installed")

// call runs one API call under RequestTimeout and explains its error:
// verb and resource are what RBAC names ("create",
// "sandboxes.agents.x-k8s.io").
func (s *Service) call(ctx context.Context, verb, resource string, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeoutCause(ctx, s.opts.RequestTimeout, errNoAnswer)
	defer cancel()
	err := f(cctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if context.Cause(cctx) == errNoAnswer {
		err = errNoAnswer
	}
	return s.explain(verb, resource, err)
}

// errNoAnswer is the cause of a call that ran out of RequestTimeout.
var errNoAnswer = errors.New("no answer")

// explain turns an API error into one that says what to do.
func (s *Service) explain(verb, resource string, err error) error {
	where := fmt.Sprintf("the Kubernetes API server at %s", s.server)
	switch {
	case errors.Is(err, errNoAnswer):
		return fmt.Errorf("kubernetes sandbox: %s did not answer within %v (to %s %s): check that the cluster is up and that the kubeconfig names it: %w: %w", where, s.opts.RequestTimeout, verb, resource, ErrUnreachable, context.DeadlineExceeded)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("kubernetes sandbox: %s refused the connection: check that the cluster is up and that the kubeconfig names it: %w: %w", where, ErrUnreachable, err)
	case isNetError(err):
		return fmt.Errorf("kubernetes sandbox: %s cannot be reached: %w: %w", where, ErrUnreachable, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes sandbox: %s did not accept the kubeconfig's credentials (they may have expired: renew them with your cluster's login): %w", where, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes sandbox: RBAC forbids %s on %s in namespace %s: grant the verb %q on %q to the kubeconfig's user or service account (the minimal Role is in docs/sandboxes.md, under Kubernetes): %w",
			verb, resource, s.ns, verb, resource, err)
	case isMissingResource(err):
		install := installSandbox
		if strings.Contains(resource, "extensions.") {
			install = installExtensions
		}
		return fmt.Errorf("kubernetes sandbox: %w in the cluster at %s (it serves no %s): install it with %s: %v", ErrNotInstalled, s.server, resource, install, err)
	}
	return fmt.Errorf("kubernetes sandbox: %s %s: %w", verb, resource, err)
}

// isMissingResource reports a 404 for the resource itself (a resource the
// server does not serve), not for one object.
func isMissingResource(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == ""
}

func isNetError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || (errors.As(err, &ne) && !apierrors.IsTimeout(err))
}
