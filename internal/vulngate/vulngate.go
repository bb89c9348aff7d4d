// Package vulngate reads govulncheck's JSON output and decides what fails
// the build: a vulnerability in a package the module imports, from a
// required module that a newer version fixes. Everything else it finds is
// reported without failing: a fixed vulnerability in the standard library
// (its fix is a newer Go toolchain, named in the report), one that no
// version fixes yet, and one in a required module none of whose
// vulnerable packages is imported.
package vulngate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Finding is one vulnerability govulncheck found, at the deepest level it
// reached.
type Finding struct {
	// ID is the vulnerability's identifier, e.g. GO-2026-6860.
	ID string
	// Module and Version are where it was found ("stdlib" for the
	// standard library).
	Module, Version string
	// Fixed is the first version without it, "" when there is none.
	Fixed string
	// Package is the vulnerable package the module imports, "" when
	// only the module is required.
	Package string
	// Summary is the vulnerability's one-line description.
	Summary string
}

// Fails reports whether f fails the build: an imported package of a
// required module, with a fix to upgrade to.
func (f Finding) Fails() bool {
	return f.Module != "stdlib" && f.Package != "" && f.Fixed != ""
}

// String describes f and what to do about it.
func (f Finding) String() string {
	where := f.Module + "@" + f.Version
	if f.Package != "" {
		where = f.Package + " (" + where + ")"
	}
	var todo string
	switch {
	case f.Fixed == "":
		todo = "no fixed version yet"
	case f.Module == "stdlib":
		todo = "fixed in Go " + strings.TrimPrefix(f.Fixed, "v") + ": build with that toolchain or newer"
	default:
		todo = "fixed in " + f.Fixed + ": go get " + f.Module + "@" + f.Fixed
	}
	s := fmt.Sprintf("%s in %s: %s", f.ID, where, todo)
	if f.Summary != "" {
		s += " (" + f.Summary + ")"
	}
	return s
}

type message struct {
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV   string `json:"osv"`
		Fixed string `json:"fixed_version"`
		Trace []struct {
			Module  string `json:"module"`
			Version string `json:"version"`
			Package string `json:"package"`
		} `json:"trace"`
	} `json:"finding"`
}

// Read decodes govulncheck's -format json stream and returns one Finding
// per vulnerability and module, at the deepest level found, sorted by
// module and identifier.
func Read(r io.Reader) ([]Finding, error) {
	dec := json.NewDecoder(r)
	summaries := map[string]string{}
	byKey := map[[2]string]*Finding{}
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's output: %w", err)
		}
		if m.OSV != nil {
			summaries[m.OSV.ID] = m.OSV.Summary
		}
		if m.Finding == nil || len(m.Finding.Trace) == 0 {
			continue
		}
		t := m.Finding.Trace[0]
		key := [2]string{m.Finding.OSV, t.Module}
		f := byKey[key]
		if f == nil {
			f = &Finding{ID: m.Finding.OSV, Module: t.Module, Version: t.Version, Fixed: m.Finding.Fixed}
			byKey[key] = f
		}
		if f.Package == "" {
			f.Package = t.Package
		}
	}
	out := make([]Finding, 0, len(byKey))
	for _, f := range byKey {
		f.Summary = summaries[f.ID]
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
