package modal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// explain names the cause of err, a failure of op: the sentinel errors
// of the package are wrapped together with err.
func (s *Service) explain(op string, err error) error {
	st, _ := status.FromError(err)
	var remoteErr sdk.RemoteError
	switch code := status.Code(err); {
	case strings.Contains(err.Error(), "missing credentials"):
		return fmt.Errorf("modal: %s: %w: none were found (set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, a profile in ~/.modal.toml, or the provider's token_id and token_secret)", op, ErrUnauthorized)
	case code == codes.Unauthenticated || code == codes.PermissionDenied:
		return fmt.Errorf("modal: %s: %w (the token pair of the options, of MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, or of ~/.modal.toml): %s", op, ErrUnauthorized, st.Message())
	case code == codes.ResourceExhausted:
		hint := ""
		for _, d := range st.Details() {
			if p, ok := d.(*pb.RPCRetryPolicy); ok {
				after := time.Duration(float64(p.GetRetryAfterSecs()) * float64(time.Second))
				hint = fmt.Sprintf(" (Modal asked to retry after %v; the wait is bounded by %s, MaxThrottleWait)", after, s.throttleWait)
			}
		}
		return fmt.Errorf("modal: %s: %w%s: %w", op, ErrRateLimited, hint, err)
	case errors.As(err, &remoteErr) && strings.HasPrefix(remoteErr.Exception, "Image build"):
		return fmt.Errorf("modal: %s: %w: %s", op, ErrBuildFailed, remoteErr.Exception)
	case code == codes.Unavailable:
		return fmt.Errorf("modal: %s: %w: %s", op, ErrUnavailable, st.Message())
	case code == codes.DeadlineExceeded:
		return fmt.Errorf("modal: %s: %w: %s", op, ErrUnavailable, st.Message())
	}
	return fmt.Errorf("modal: %s: %w", op, err)
}

// isNotFound reports whether err says the object does not exist.
func isNotFound(err error) bool {
	var nf sdk.NotFoundError
	return err != nil && (status.Code(err) == codes.NotFound || errors.As(err, &nf))
}

// describeEnd says how a sandbox ended, from the exit code the SDK
// reports (124 for its lifetime limit, 137 when terminated).
func describeEnd(code int) string {
	switch code {
	case 124:
		return "it reached its lifetime limit (create's Timeout)"
	case 137:
		return "it was terminated"
	}
	return "its entrypoint exited with status " + strconv.Itoa(code)
}
