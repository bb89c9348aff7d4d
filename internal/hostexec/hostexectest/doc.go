// Package hostexectest observes the process groups of a Linux host for
// the tests of internal/hostexec and of the packages that start host
// processes through it (providers/sandbox/local): it waits for a group
// to form and proves that every process of a killed group is gone.
//
// Its process functions exist on Linux only, where /proc lists every
// process with its group; the tests that use them carry the linux build
// tag. Its file helpers (Mkdir, WriteHost, ReadHost, Symlink, WantErr,
// Exec) serve both test suites on every platform.
package hostexectest
