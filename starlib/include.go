package starlib

import (
	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

var includeBuiltin = &Builtin{
	Name:   "include",
	Static: true,
	Group:  "nodes",
	Doc: "Reads one UTF-8 file into the prompt when the node is evaluated.\n\n" +
		"src= is an application file resolved from the runtime's working directory; path= is a file of the enclosing workspace() or sandbox(). " +
		"The default rendering is a heading \"## Contents of `<src>`\", a blank line and the file's text; title= replaces the heading text and title=False omits the heading. " +
		"A file larger than max_bytes is not inlined: inside an agent() it is copied to that agent's private staging area (removed after the session) and a read instruction naming the copy, its size and line count is authored instead; outside an agent that is an error. " +
		"Directories, binary files and invalid UTF-8 are errors.",
	Params: []Param{
		{Name: "src", Type: "str | None", Default: "None", Doc: "Application file, relative to the runtime's working directory."},
		{Name: "path", Type: "str | None", Default: "None", Doc: "File in the active workspace or sandbox."},
		{Name: "max_bytes", Type: "int | None", Default: "None", Positive: true, OmitFor: "no limit", Doc: "Positive inline limit in bytes; unlimited when omitted."},
		{Name: "title", Type: "str | bool | None", Default: "None", Doc: "Heading text, or False for no heading."},
	},
	Returns: "an include node",
	Example: `agent("Review against the policy.", block(include(src = "policy.md", max_bytes = 16384), tag = "policy"))`,
	Impl: func(c *Call) (starlark.Value, error) {
		n := &eval.Include{Src: c.Str("src"), Path: c.Str("path"), Position: c.pos}
		if c.Has("src") == c.Has("path") {
			return nil, c.Errorf("pass exactly one of src= (an application file) and path= (a file of the enclosing workspace or sandbox)")
		}
		if c.Has("src") && n.Src == "" || c.Has("path") && n.Path == "" {
			return nil, c.Errorf("the file name must be a non-empty string")
		}
		if n.Path != "" {
			if _, err := eval.CheckLogicalPath(n.Path, false); err != nil {
				return nil, c.Errorf("path: %v", err)
			}
		}
		if mb, set, err := c.Int("max_bytes"); err != nil {
			return nil, err
		} else if set {
			n.MaxBytes = mb // positive: the catalog checked it
		}
		switch t := c.Value("title").(type) {
		case nil:
		case starlark.String:
			s := string(t)
			n.Title = &s
		case starlark.Bool:
			if t {
				return nil, c.Errorf("title must be a string or False, got True")
			}
			n.NoTitle = true
		}
		return nodeValue(n), nil
	},
}
