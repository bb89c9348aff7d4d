package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"go.starlark.net/syntax"

	"github.com/aml-go/aml/internal/services"
	"github.com/aml-go/aml/journal"
	"github.com/aml-go/aml/starlib"
)

// The aml executable and its companion.
//
// The clients of outside services (the Docker Engine, Modal, Daytona,
// Kubernetes, S3, Temporal) cost tens of milliseconds of package initialisation at every
// start of a program that links them, so aml (cmd/aml) links none of
// them and starts in a few milliseconds; aml-full (cmd/aml-full) is the
// same command with all of them (services/full). One go install of
// ./cmd/... puts both in place, and a release archive holds both.
//
// When an invocation needs a service, aml runs aml-full in its place
// with the same arguments, environment and process id (exec), the way
// git runs git-foo, so that users never see the difference. It needs a
// service when:
//   - the command is one of the services' own (aml sandbox prune, aml
//     workspace verify, aml cancel, aml answer, aml worker, whose
//     workflows may call any provider), or aml run or aml runs with
//     --temporal;
//   - an argument names an s3:// store, or AML_TEMPORAL_BLOB_STORE does
//     for a command that talks to Temporal;
//   - aml check lints (without --no-lint: buildtools' lint brings
//     protocol buffers along);
//   - aml run or aml resume exports its trace over OTLP
//     (--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
//   - a workflow it runs, tests, checks, draws or resumes, or a module
//     such a workflow loads, names one of the services' builtins
//     (services.Builtins).
//
// aml doc and aml lsp, which describe every builtin, also run aml-full
// when it is there, and otherwise describe the others.
//
// aml-full is looked for in the directory AML_EXEC_PATH names, then next
// to the aml executable (its symbolic links resolved), then on PATH.
// When a needed companion is missing, aml says so and how to install it,
// and exits with status 2. A builtin of the services that a workflow
// reaches all the same (in a build without them) fails with the same
// advice.

// companionDoc is the section of docs/reference/cli.md on the
// companion.
const companionDoc = "`aml` does not link the clients of outside services, whose SDKs take tens of milliseconds to start: its companion `aml-full`, installed beside it (`go install github.com/aml-go/aml/cmd/...@latest`, or a release archive), is the same command with the Docker Engine, Modal, Daytona, Kubernetes, S3 and Temporal clients linked. " +
	"`aml` runs `aml-full` in its place, with the same arguments, environment and process id, when the command needs one of them: `aml sandbox prune`, `aml worker`, `aml cancel`, `aml answer` and `aml workspace verify`; `aml run --temporal` and `aml runs --temporal`; `aml check` unless `--no-lint` (its lint comes from buildtools); `aml run` or `aml resume` exporting its trace over OTLP (`--otlp-endpoint`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); an `s3://` argument, or `AML_TEMPORAL_BLOB_STORE` naming one for a command that talks to Temporal; " +
	"a workflow that `aml run`, `aml test`, `aml check`, `aml graph` or `aml resume` is given, or a module it loads, that names `docker_sandbox`, `s3_workspace`, `daytona_sandbox`, `modal_sandbox` or `kubernetes_sandbox`. `aml doc` and `aml lsp` run it when it is there, to describe those builtins too.\n\n" +
	"`aml-full` is looked for in the directory `AML_EXEC_PATH` names, then beside `aml` (symbolic links resolved), then on `PATH`. Without it, a command that needs it fails before anything runs, with exit status 2 and the command that installs it; every other command works."

// companionName is the name of the companion executable.
const companionName = "aml-full"

// delegatedEnv marks a process that aml started in its place, so that a
// companion that does not link the services fails instead of starting
// aml again.
const delegatedEnv = "AML_DELEGATED"

// linked is the build's services: all of them in aml-full, none in aml.
// Run sets it before anything reads it; read-only afterwards.
var linked services.Set

// Build is what package main links into the command.
type Build struct {
	// Version is the version package main was linked with ("" when
	// none).
	Version string
	// Services are the clients of outside services the build links:
	// services/full's Linked in aml-full, the zero Set in aml.
	Services services.Set
}

// installAdvice says how to put the companion in place.
const installAdvice = "install it beside aml with go install github.com/aml-go/aml/cmd/...@latest (in a clone: go install ./cmd/...), or unpack both from a release archive"

// errNotLinked is the error of a use of the services in a build without
// them.
func errNotLinked(what string) error {
	return fmt.Errorf("%s needs %s, the companion of aml that links the Docker, Modal, Daytona, S3 and Temporal clients: run it with %s, or %s", what, companionName, companionName, installAdvice)
}

// alwaysCompanion are the commands that run in aml-full whenever aml
// does not link the services: required says that they cannot work
// without them.
var alwaysCompanion = map[string]bool{
	"sandbox": true,
	"worker":  true,
	"cancel":  true,
	"answer":  true,
	"doc":     false,
	"lsp":     false,
}

// temporalCommands are the commands that may open the Temporal blob
// store that AML_TEMPORAL_BLOB_STORE names.
var temporalCommands = []string{"run", "worker", "cancel", "answer", "runs"}

// needsCompanion reports why the command cmd with args needs the
// services ("" when it does not), and whether it can run without them.
func needsCompanion(cmd string, args []string) (why string, required bool) {
	// A command's help is aml's own, with or without the companion.
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		return "", false
	}
	if req, ok := alwaysCompanion[cmd]; ok {
		why = "aml " + cmd
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			why += " " + args[0]
		}
		return why, req
	}
	if cmd == "workspace" && len(args) > 0 && args[0] == "verify" {
		return "aml workspace verify", true
	}
	for _, a := range args {
		if strings.HasPrefix(a, "s3://") || strings.Contains(a, "=s3://") {
			return "the s3:// store in " + a, true
		}
	}
	if cmd == "run" || cmd == "runs" {
		for _, a := range args {
			if a == "--temporal" || a == "-temporal" || strings.HasPrefix(a, "--temporal=") || strings.HasPrefix(a, "-temporal=") {
				return "aml " + cmd + " --temporal", true
			}
		}
	}
	if cmd == "run" || cmd == "resume" {
		for _, a := range args {
			if a == "--otlp-endpoint" || a == "-otlp-endpoint" || strings.HasPrefix(a, "--otlp-endpoint=") || strings.HasPrefix(a, "-otlp-endpoint=") {
				return "--otlp-endpoint", true
			}
		}
		for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
			if os.Getenv(v) != "" {
				return "the OTLP exporter that " + v + " asks for", true
			}
		}
	}
	if slices.Contains(temporalCommands, cmd) && strings.HasPrefix(os.Getenv("AML_TEMPORAL_BLOB_STORE"), "s3://") {
		return "the blob store AML_TEMPORAL_BLOB_STORE names", true
	}
	if cmd == "check" && !slices.ContainsFunc(args, func(a string) bool { return a == "--no-lint" || a == "-no-lint" || strings.HasPrefix(a, "--no-lint=") }) {
		if why := scanForServices(workflowArgs(args)); why != "" {
			return why, true
		}
		return "the lint of aml check (buildtools)", true
	}
	switch cmd {
	case "run", "test", "check", "graph":
		return scanForServices(workflowArgs(args)), true
	case "resume":
		return scanForServices(resumedWorkflow(args)), true
	}
	return "", false
}

// workflowArgs are the arguments that name an existing file or
// directory: the workflows (or the directories of workflows) a command
// was given. A flag's value that names one is scanned too, which at
// worst runs the companion when it was not needed.
func workflowArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		if _, err := os.Stat(a); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// resumedWorkflow is the workflow file of the run aml resume RUN
// --journal DIR names, when the journal can be read.
func resumedWorkflow(args []string) []string {
	var dir, id string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--journal" || a == "-journal":
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--journal=") || strings.HasPrefix(a, "-journal="):
			_, dir, _ = strings.Cut(a, "=")
		case strings.HasPrefix(a, "-"):
		case id == "":
			id = a
		}
	}
	if dir == "" || id == "" {
		return nil
	}
	runs, err := journal.List(dir)
	if err != nil {
		return nil
	}
	for _, r := range runs {
		if r.ID == id && r.Workflow != "" {
			return []string{r.Workflow}
		}
	}
	return nil
}

// scanForServices reads the workflows under paths (files, and the .star
// files of directories, recursively) and the modules they load, and
// says where the first of them names a builtin of the services (""
// when none does). Nothing is executed; a file that cannot be read or
// parsed is skipped, for the command to report.
func scanForServices(paths []string) string {
	names := map[string]bool{}
	for _, n := range services.Builtins {
		names[n] = true
	}
	seen := map[string]bool{}
	var scan func(file string) string
	scan = func(file string) string {
		abs, err := filepath.Abs(file)
		if err != nil || seen[abs] {
			return ""
		}
		seen[abs] = true
		data, err := starlib.ReadSource(file)
		if err != nil {
			return ""
		}
		f, err := starlib.FileOptions.Parse(file, data, 0)
		if err != nil {
			return ""
		}
		var found string
		syntax.Walk(f, func(n syntax.Node) bool {
			if id, ok := n.(*syntax.Ident); ok && found == "" && names[id.Name] {
				found = fmt.Sprintf("%s:%d:%d calls %s(), which", file, id.NamePos.Line, id.NamePos.Col, id.Name)
			}
			return found == ""
		})
		if found != "" {
			return found
		}
		for _, st := range f.Stmts {
			ld, ok := st.(*syntax.LoadStmt)
			if !ok {
				continue
			}
			if name, _ := ld.Module.Value.(string); name != "" && !strings.HasPrefix(name, "@") {
				if why := scan(starlib.ModuleFile(file, name)); why != "" {
					return why
				}
			}
		}
		return ""
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !info.IsDir() {
			if why := scan(p); why != "" {
				return why
			}
			continue
		}
		var why string
		_ = filepath.WalkDir(p, func(f string, d fs.DirEntry, err error) error {
			if err != nil || why != "" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(f, ".star") {
				why = scan(f)
			}
			return nil
		})
		if why != "" {
			return why
		}
	}
	return ""
}

// findCompanion returns the path of aml-full: in AML_EXEC_PATH, next to
// this executable, else on PATH.
func findCompanion() (string, error) {
	var dirs []string
	if d := os.Getenv("AML_EXEC_PATH"); d != "" {
		dirs = append(dirs, d)
	}
	if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		dirs = append(dirs, filepath.Dir(self))
	}
	for _, d := range dirs {
		p := filepath.Join(d, companionName)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(companionName)
}

// runCompanion replaces this process with aml-full and the same args;
// it returns only when that cannot be done. Without a companion, a
// command that can run without the services (required false) runs here
// all the same.
func runCompanion(c *command, why string, required bool, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if os.Getenv(delegatedEnv) != "" {
		fmt.Fprintf(stderr, "aml: %s: %s does not link the services it was started for (%s); %s\n", why, os.Args[0], delegatedEnv+" is set", installAdvice)
		return exitUsage
	}
	path, err := findCompanion()
	if err != nil {
		if !required {
			return c.run(args[1:], stdin, stdout, stderr)
		}
		fmt.Fprintf(stderr, "aml: %s\n", errNotLinked(why))
		return exitUsage
	}
	env := append(os.Environ(), delegatedEnv+"=1")
	err = syscall.Exec(path, append([]string{path}, args...), env)
	fmt.Fprintf(stderr, "aml: %s: starting %s: %v\n", why, path, err)
	return exitUsage
}

// standIns are the builtins of the services in a build without them:
// their names (for aml check's suggestions), each failing with the
// advice to run aml-full. A workflow that names one runs in aml-full
// in the first place, so a stand-in is reached only by a path the scan
// cannot see.
func standIns() *starlib.Extension {
	ext := &starlib.Extension{Name: "services"}
	for _, name := range services.Builtins {
		ext.Builtins = append(ext.Builtins, starlib.StandIn(name, "providers",
			"Linked in "+companionName+", the companion of aml that links the Docker, Modal, Daytona, S3 and Temporal clients.",
			errNotLinked(name+"()")))
	}
	return ext
}
