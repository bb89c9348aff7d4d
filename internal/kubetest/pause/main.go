// Command pause is the process that holds a pod's namespaces on the test
// cluster of scripts/kube-cluster.sh (the image localhost/aml-test/pause:1), so that
// the cluster needs no registry. It waits for SIGTERM or SIGINT and reaps
// the children that the pod's processes leave to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
