package cli

import (
	"fmt"
	"strings"
	"sync"

	"github.com/charmbracelet/log"

	"github.com/aml-go/aml/internal/procscope"
	"github.com/aml-go/aml/internal/services"
)

// leftovers tells a run what aml processes of this machine that were
// killed outright (SIGKILL, OOM, power loss) left behind: processes their
// commands started that still run (found by their owner mark when the run
// starts) and Docker sandbox containers (found at the first acquisition
// of a docker_sandbox()). It prints one warning line for each kind, naming
// them and the command that ends them, and kills nothing unasked. It is
// safe for concurrent use.
type leftovers struct {
	mu     sync.Mutex
	logger *log.Logger
	seen   map[string]bool
}

// runLeftovers routes the reports of the providers that extensions()
// made (they live as long as the process) to the run going on.
var runLeftovers leftovers

// start makes logger the run's and reports the leftover processes.
func (l *leftovers) start(logger *log.Logger) {
	l.mu.Lock()
	l.logger, l.seen = logger, map[string]bool{}
	l.mu.Unlock()
	if o := procscope.Orphans(); len(o) > 0 {
		logger.Warn(orphanLine(o))
	}
}

// stop ends the run's reports.
func (l *leftovers) stop(logger *log.Logger) {
	l.mu.Lock()
	if l.logger == logger {
		l.logger = nil
	}
	l.mu.Unlock()
}

// containers is the docker.Options.Leftovers of the aml command's
// providers: each container is reported once per run.
func (l *leftovers) containers(found []services.Container) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logger == nil {
		return
	}
	var fresh []services.Container
	for _, c := range found {
		if !l.seen[c.ID] {
			l.seen[c.ID] = true
			fresh = append(fresh, c)
		}
	}
	if len(fresh) > 0 {
		l.logger.Warn(containerLine(fresh))
	}
}

// orphanLine names leftover processes and the command that ends them.
func orphanLine(o []procscope.Orphan) string {
	pids := make([]string, 0, len(o))
	for _, p := range o {
		pids = append(pids, fmt.Sprintf("%d (of aml %d)", p.PID, p.Owner))
	}
	return fmt.Sprintf("%s left by killed aml processes still %s: %s; `aml sandbox prune --kill-orphans` ends them",
		plural(len(o), "process", "processes"), verb(len(o), "runs", "run"), strings.Join(shortList(pids), ", "))
}

// containerLine names leftover containers and the command that removes
// them.
func containerLine(c []services.Container) string {
	names := make([]string, 0, len(c))
	for _, l := range c {
		names = append(names, l.Name)
	}
	return fmt.Sprintf("%s left by killed aml processes still %s: %s; `aml sandbox prune` removes them",
		plural(len(c), "Docker sandbox container", "Docker sandbox containers"), verb(len(c), "exists", "exist"), strings.Join(shortList(names), ", "))
}

// shortList keeps a line short: the first five, then how many more.
func shortList(s []string) []string {
	if len(s) <= 5 {
		return s
	}
	return append(s[:5:5], fmt.Sprintf("and %d more", len(s)-5))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
