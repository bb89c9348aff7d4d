package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/aml-go/aml/internal/dockertest"
	"github.com/aml-go/aml/internal/temporaltest"
	"github.com/aml-go/aml/temporal"
)

// placesWorkflow: a workspace and a read-write local sandbox in it, held
// on one worker; the second script is in flight when that worker is
// killed. %[1]s is a log file outside the workspace, %[2]s the seconds the
// second script sleeps.
const placesWorkflow = `configure(workspace_provider = deterministic_workspace(), sandbox_provider = local_sandbox())

def main():
    return workspace(
        sandbox(
            file("zero\n", path = "steps.txt"),
            script("echo one >> steps.txt; echo first >> %[1]s", shell = "sh"),
            script("echo second >> %[1]s; sleep %[2]s; echo two >> steps.txt", shell = "sh"),
            script(command = "cat", args = ["steps.txt"]),
            access = "read-write",
        ),
        id = "fleet-places",
    )
`

// TestTemporalFleetPlaces: a run's workspace and sandbox live on one
// worker. SIGKILL that worker while a script runs there: the run acquires
// the scope again on the other worker, restores the workspace's files from
// the last checkpoint (in the blob store), runs the script that was in
// flight again, and ends with the text of an uninterrupted run; no script
// that had finished runs again. aml cancel of a run whose script hangs
// ends the script's process.
func TestTemporalFleetPlaces(t *testing.T) {
	srv, bin, dir, fake := setUp(t)
	// The runs of this test are in the namespace whose runs Temporal asks
	// to continue as new after 200 events.
	t.Setenv("TEMPORAL_NAMESPACE", temporaltest.ShortNamespace)
	sessionLog := filepath.Join(dir, "sessions.log")
	workers := startWorkers(t, bin, srv.Address, nil, func(string) []string {
		return []string{"FAKE_AGENT=" + fake, "SESSION_LOG=" + sessionLog}
	})
	logFile := filepath.Join(dir, "scripts.log")
	wf := filepath.Join(dir, "places.star")
	if err := os.WriteFile(wf, []byte(fmt.Sprintf(placesWorkflow, logFile, "0")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "--quiet", "--temporal", srv.Address, wf).Output()
	if err != nil {
		t.Fatalf("aml run --temporal: %v", err)
	}
	want := "zero\none\ntwo\n"
	if string(out) != want {
		t.Fatalf("an uninterrupted run printed %q, want %q", out, want)
	}

	// The same run, with the worker that holds the scope killed while
	// the second script sleeps.
	os.Remove(logFile)
	if err := os.WriteFile(wf, []byte(fmt.Sprintf(placesWorkflow, logFile, "4")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, wf).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	runID := strings.TrimSpace(string(out))
	deadline := time.Now().Add(time.Minute)
	for countLines(t, logFile, "second") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second script did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: temporaltest.ShortNamespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	desc, err := c.DescribeWorkflow(ctx, runID, "")
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	for _, pa := range desc.RawResponse.GetPendingActivities() {
		if pa.GetActivityType().GetName() == temporal.ExecActivity {
			holder = pa.GetLastWorkerIdentity()
		}
	}
	victim := ""
	for name, w := range workers {
		if strings.HasSuffix(holder, ":"+strconv.Itoa(w.Process.Pid)) {
			victim = name
		}
	}
	if victim == "" {
		t.Fatalf("no worker is %q, which runs the script", holder)
	}
	killed := time.Now()
	_ = workers[victim].Process.Signal(syscall.SIGKILL)
	var res temporal.RunResult
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	if err := c.GetWorkflow(wctx, runID, "").Get(wctx, &res); err != nil {
		t.Fatalf("the run after the worker holding its workspace was killed: %v\n%s", err, historyOf(t, c, runID))
	}
	if res.Text != want {
		t.Fatalf("after the kill the run ended with %q, want %q (the workspace restored from its checkpoint, the script in flight run again)", res.Text, want)
	}
	if n := countLines(t, logFile, "first"); n != 1 {
		t.Fatalf("the first script, finished before the kill, ran %d times", n)
	}
	if n := countLines(t, logFile, "second"); n != 2 {
		t.Fatalf("the script in flight at the kill ran %d times, want 2", n)
	}
	t.Logf("worker %s, holding the workspace, killed mid-script; the run ended %s later on the other worker with the uninterrupted text", victim, time.Since(killed).Round(time.Millisecond))

	// A run of 120 sessions, whose history Temporal finds long after 200
	// events: it continues as new, each execution resuming the journal of
	// the ones before, and ends with every session run once.
	long := filepath.Join(dir, "long.star")
	longSrc := "fake = acp_agent(command = env(\"FAKE_AGENT\", \"fake-acp-agent\"), env = {\"LOG\": env(\"SESSION_LOG\", \"/dev/null\")}, name = \"fake\")\nconfigure(max_concurrent_agents = 8, max_agent_calls = 0)\n\ndef main():\n    n = 0\n    for b in range(10):\n        n += len(evaluate_all([agent(\"append $LOG start l%d-%d\\nsay ok\" % (b, i), provider = fake) for i in range(12)]))\n    return str(n)\n"
	if err := os.WriteFile(long, []byte(longSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, long).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	longID := strings.TrimSpace(string(out))
	if err := c.GetWorkflow(ctx, longID, "").Get(ctx, &res); err != nil || res.Text != "120" {
		t.Fatalf("the long run: %q, %v", res.Text, err)
	}
	starts, _ := sessionTimes(t, sessionLog)
	if len(starts) != 120 {
		t.Fatalf("%d distinct sessions started, want 120", len(starts))
	}
	for id, ts := range starts {
		if len(ts) != 1 {
			t.Fatalf("session %s started %d times across the run's executions", id, len(ts))
		}
	}
	executions, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: temporaltest.ShortNamespace, Query: "WorkflowId = '" + longID + "'"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(executions.GetExecutions()); n < 2 {
		t.Fatalf("the long run had %d execution(s): it never continued as new", n)
	}
	t.Logf("120 sessions in %d executions, each run once", len(executions.GetExecutions()))
	out, err = exec.Command(bin, "runs", "--temporal", srv.Address).Output()
	if err != nil || strings.Count(string(out), longID) != 1 {
		t.Fatalf("aml runs lists the continued run %d times: %v\n%s", strings.Count(string(out), longID), err, out)
	}
	out, err = exec.Command(bin, "runs", "show", longID, "--temporal", srv.Address).Output()
	show := string(out)
	if err != nil || !strings.Contains(show, fmt.Sprintf("executions: %d", len(executions.GetExecutions()))) ||
		len(regexp.MustCompile(`agent fake at \S*/long.star:7:37 \[c#0/[^\]]*agent#0\]: finished`).FindAllString(show, -1)) != 120 || !strings.Contains(show, "result:\n120\n") ||
		strings.Contains(show, "internalSession") || strings.Contains(show, "session (") {
		t.Fatalf("aml runs show of the continued run: %v\n%s", err, show)
	}

	t.Run("docker", func(t *testing.T) { dockerCancel(t, bin, srv.Address, dir, c) })

	// aml cancel ends a hanging script's process on the worker left.
	marker := "aml-fleet-hang-" + strconv.Itoa(os.Getpid())
	hang := filepath.Join(dir, "hang.star")
	hangSrc := fmt.Sprintf("configure(workspace_provider = deterministic_workspace(), sandbox_provider = local_sandbox())\n\ndef main():\n    return workspace(sandbox(script(command = \"sh\", args = [\"-c\", \"echo up >> %s; sleep 600\", %q], timeout_ms = 600000), access = \"read-write\"))\n", logFile, marker)
	if err := os.WriteFile(hang, []byte(hangSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(logFile)
	out, err = exec.Command(bin, "run", "--detach", "--temporal", srv.Address, hang).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	hangID := strings.TrimSpace(string(out))
	for hangDeadline := time.Now().Add(time.Minute); countLines(t, logFile, "up") < 1; {
		if time.Now().After(hangDeadline) {
			t.Fatalf("the hanging script did not start\n%s", historyOf(t, c, hangID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(processesWith(t, marker)) == 0 {
		t.Fatal("no script process before the cancel")
	}
	out, err = exec.Command(bin, "cancel", hangID, "--temporal", srv.Address).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "cancelled "+hangID {
		t.Fatalf("aml cancel: %v\n%s", err, out)
	}
	if left := processesWith(t, marker); len(left) > 0 {
		t.Fatalf("script processes %v outlive the cancelled run", left)
	}
	// Its effects are the run's own: not the sessions that held its
	// scopes, which are Temporal's machinery.
	out, err = exec.Command(bin, "runs", "show", hangID, "--temporal", srv.Address).Output()
	if show := string(out); err != nil || !strings.Contains(show, "state:    cancelled") || !strings.Contains(show, "acquire workspace") ||
		!strings.Contains(show, "script sh -c echo up") || strings.Contains(show, "internalSession") || strings.Contains(show, "session (") {
		t.Fatalf("aml runs show of the cancelled run: %v\n%s", err, show)
	}
}

// dockerCancel: a run whose script hangs in a Docker sandbox on a worker
// is cancelled; its container is removed on that worker.
func dockerCancel(t *testing.T, bin, address, dir string, c client.Client) {
	cli := dockertest.Engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, "aml-test/busybox:1"); err != nil {
		t.Skipf("no aml-test/busybox:1 image (%v): run scripts/docker-for-tests.sh, as .ci/run does", err)
	}
	wf := filepath.Join(dir, "docker.star")
	src := "configure(workspace_provider = deterministic_workspace(), sandbox_provider = docker_sandbox(image = \"aml-test/busybox:1\"))\n\ndef main():\n    return workspace(sandbox(script(\"echo in-the-container\", shell = \"sh\"), script(command = \"sleep\", args = [\"600\"], timeout_ms = 600000), access = \"read-write\"))\n"
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "--detach", "--temporal", address, wf).Output()
	if err != nil {
		t.Fatalf("aml run --detach: %v", err)
	}
	runID := strings.TrimSpace(string(out))
	running := func() int {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "aml.run="+runID))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for deadline := time.Now().Add(2 * time.Minute); running() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no container for run %s\n%s", runID, historyOf(t, c, runID))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The sleep is running once the first script's result is in history.
	for deadline := time.Now().Add(time.Minute); ; {
		out, _ := exec.Command(bin, "runs", "show", runID, "--temporal", address).Output()
		if strings.Contains(string(out), "script sleep 600") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hanging script did not start:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err = exec.Command(bin, "cancel", runID, "--temporal", address).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "cancelled "+runID {
		t.Fatalf("aml cancel: %v\n%s", err, out)
	}
	if n := running(); n != 0 {
		t.Fatalf("%d container(s) of the cancelled run remain", n)
	}
}

// processesWith returns the pids of the processes whose command line
// holds marker.
func processesWith(t *testing.T, marker string) []int {
	t.Helper()
	return processes(t, func(cmdline []byte) bool { return bytes.Contains(cmdline, []byte(marker)) })
}

// historyOf renders a run's history, one event a line, for a failure
// report.
func historyOf(t *testing.T, c client.Client, runID string) string {
	t.Helper()
	var b strings.Builder
	iter := c.GetWorkflowHistory(context.Background(), runID, "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
			break
		}
		fmt.Fprintf(&b, "%d %s %s\n", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType())
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			fmt.Fprintf(&b, "    %s on %s\n", a.GetActivityType().GetName(), a.GetTaskQueue().GetName())
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			fmt.Fprintf(&b, "    by %s\n", a.GetIdentity())
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			fmt.Fprintf(&b, "    %s\n", a.GetFailure().GetMessage())
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
			fmt.Fprintf(&b, "    %s\n", a.GetFailure().GetMessage())
		}
	}
	return b.String()
}
