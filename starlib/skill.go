package starlib

import (
	"go.starlark.net/starlark"

	"github.com/aml-go/aml/eval"
)

var skillBuiltin = &Builtin{
	Name:  "skill",
	Group: "capabilities",
	Doc: `Attaches a local Agent Skills package to the nearest enclosing agent() for its whole session.

src is a package directory resolved from the runtime's working directory: it must contain a root SKILL.md whose YAML frontmatter sets name (lowercase letters, digits and hyphens, at most 64 characters, equal to the directory name) and description (at most 1,024 characters). Regular files are copied recursively into the agent's private staging area as .agents/skills/<name>/ and removed after the session; symbolic links and special files are errors. The body is never put into the prompt: providers with native discovery map the staged package, the others get a short system fragment naming each skill, its description and its SKILL.md path. Valid only inside agent() (not in system() or follow_up()); names must be unique within one agent.`,
	Params:  []Param{{Name: "src", Type: "str", Positional: true, Doc: "The package directory."}},
	Returns: "a skill node",
	Example: `agent(skill("skills/evidence-review"), "Review the current change.")`,
	Impl: func(c *Call) (starlark.Value, error) {
		src := c.Str("src")
		if src == "" {
			return nil, c.Errorf("src must be a non-empty path to a package directory")
		}
		return nodeValue(&eval.Skill{Src: src, Position: c.pos}), nil
	},
}
