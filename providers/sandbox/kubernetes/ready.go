package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// errNotReady is the cause of a wait that ran out of ReadyTimeout.
var errNotReady = errors.New("not ready")

// ErrImage is wrapped when the sandbox's image cannot be pulled or its
// container cannot start.
var ErrImage = errors.New("the sandbox's container cannot start")

// waitReady waits for the object's Ready condition and returns its pod's
// name. Between changes of the object (watched), the pod is looked at
// every second, so that an image that cannot be pulled fails at once
// rather than at the bound.
func (s *Service) waitReady(ctx context.Context, ref objectRef) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.opts.ReadyTimeout, errNotReady)
	defer cancel()
	last := "it was created"
	for {
		u, err := s.get(ctx, ref)
		if err != nil {
			return nil, s.notReady(ctx, ref, last, err)
		}
		ready, msg := readiness(u)
		if msg != "" {
			last = msg
		}
		pod, err := s.podName(ctx, ref, u)
		if err != nil {
			return nil, s.notReady(ctx, ref, last, err)
		}
		if pod != "" {
			p, err := s.pod(ctx, ref.namespace, pod)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, s.notReady(ctx, ref, last, err)
			}
			if p != nil {
				if err := podFailure(p); err != nil {
					return nil, err
				}
				if why := podWaiting(p); why != "" {
					last = why
				}
			}
			if ready && p != nil && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				return p, nil
			}
		}
		if err := s.changed(ctx, ref, u.GetResourceVersion()); err != nil {
			return nil, s.notReady(ctx, ref, last, err)
		}
	}
}

// notReady is the error of a wait that ended: the bound, with the last
// state seen, or the error.
func (s *Service) notReady(ctx context.Context, ref objectRef, last string, err error) error {
	if context.Cause(ctx) == errNotReady {
		return fmt.Errorf("kubernetes sandbox: %s %s was not Ready within %v (ready_timeout_ms raises the bound); last: %s: %w", ref.kind, ref.name, s.opts.ReadyTimeout, last, context.DeadlineExceeded)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func (s *Service) get(ctx context.Context, ref objectRef) (*unstructured.Unstructured, error) {
	var u *unstructured.Unstructured
	err := s.call(ctx, "get", ref.resource(), func(ctx context.Context) error {
		var err error
		u, err = s.dyn.Resource(ref.gvr()).Namespace(ref.namespace).Get(ctx, ref.name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) && !isMissingResource(err) {
		return nil, fmt.Errorf("kubernetes sandbox: %s %s was deleted while it was being made ready: %w", ref.kind, ref.name, err)
	}
	return u, err
}

func (s *Service) pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var p *corev1.Pod
	err := s.call(ctx, "get", "pods", func(ctx context.Context) error {
		var err error
		p, err = s.core.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	return p, err
}

// changed returns when the object changes after version, or after a
// second.
func (s *Service) changed(ctx context.Context, ref objectRef, version string) error {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	w, err := s.dyn.Resource(ref.gvr()).Namespace(ref.namespace).Watch(wctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", ref.name).String(), ResourceVersion: version})
	if err != nil {
		// A cluster that refuses watches is polled.
		select {
		case <-wctx.Done():
		case <-ctx.Done():
		}
		return ctx.Err()
	}
	defer w.Stop()
	select {
	case <-w.ResultChan():
	case <-wctx.Done():
	}
	return ctx.Err()
}

// readiness reads the Ready condition of a Sandbox or SandboxClaim.
func readiness(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != string(sandboxv1.SandboxConditionReady) {
			continue
		}
		msg, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		if msg == "" {
			msg = reason
		} else if reason != "" {
			msg = reason + ": " + msg
		}
		return m["status"] == string(metav1.ConditionTrue), msg
	}
	return false, ""
}

// podName is the name of the object's pod, "" while it is not known: a
// Sandbox's pod carries its name (or the one its annotation gives); a
// claim's is its sandbox's.
func (s *Service) podName(ctx context.Context, ref objectRef, u *unstructured.Unstructured) (string, error) {
	if ref.kind == kindSandbox {
		if p := u.GetAnnotations()[sandboxv1.SandboxPodNameAnnotation]; p != "" {
			return p, nil
		}
		return u.GetName(), nil
	}
	name, _, _ := unstructured.NestedString(u.Object, "status", "sandbox", "name")
	if name == "" {
		return "", nil
	}
	sb, err := s.get(ctx, objectRef{kind: kindSandbox, namespace: ref.namespace, name: name})
	if err != nil {
		return "", err
	}
	return s.podName(ctx, objectRef{kind: kindSandbox, namespace: ref.namespace, name: name}, sb)
}

// podFailure is the error of a pod that will not become ready: its image
// cannot be pulled, its container cannot be made or has ended.
func podFailure(p *corev1.Pod) error {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return fmt.Errorf("kubernetes sandbox: pod %s ended (%s) before it was ready: %s %s: %w", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, ErrImage)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return fmt.Errorf("kubernetes sandbox: the image %q of pod %s cannot be pulled (%s): %s; check its name, that the cluster's nodes can reach its registry, and the pod's imagePullSecrets: %w", cs.Image, p.Name, w.Reason, w.Message, ErrImage)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return fmt.Errorf("kubernetes sandbox: the container %s of pod %s cannot start (%s): %s: %w", cs.Name, p.Name, w.Reason, w.Message, ErrImage)
			}
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Errorf("kubernetes sandbox: the container %s of pod %s exited (code %d, %s) before it was ready: its command must keep running (the provider's own does; a SandboxTemplate's must too): %w", cs.Name, p.Name, t.ExitCode, t.Reason, ErrImage)
		}
	}
	return nil
}

// podWaiting says why a pod is not ready yet (unschedulable, say), or "".
func podWaiting(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("pod %s is not scheduled (%s): %s", p.Name, c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf("pod %s: container %s is waiting (%s) %s", p.Name, cs.Name, w.Reason, w.Message)
		}
	}
	return ""
}
