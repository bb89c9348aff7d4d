package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns the flag set of the command name. Its errors go to
// stderr, and its Usage prints usage and then the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses args into fs and returns the positional arguments;
// flags may come before or after them, and "--" ends the flags. When ok
// is false the command ends at once with code: exitOK after --help (the
// usage is printed), exitUsage after a bad flag (already reported).
func parseArgs(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterleaved(fs, args)
	switch {
	case err == nil:
		return pos, exitOK, true
	case errors.Is(err, flag.ErrHelp):
		return nil, exitOK, false
	}
	return nil, exitUsage, false
}

// parseInterleaved parses flags that may come before or after positional
// arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
