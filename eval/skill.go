package eval

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/aml-go/aml/internal/filekind"
)

// Skill attaches one local Agent Skills package (a directory with a root
// SKILL.md) to the nearest enclosing agent. The package is read and
// validated when the node is evaluated and copied into the agent's private
// staging area for the session; its body is never put into the prompt.
type Skill struct {
	// Src is the package directory, resolved from the runtime's Cwd.
	Src      string
	Position Position
}

// Kind implements Node.
func (*Skill) Kind() string { return "skill" }

// Pos implements Node.
func (n *Skill) Pos() Position { return n.Position }

// AgentSkill is a staged skill as a provider sees it: its metadata and the
// concrete paths of the staged copy, valid for the session.
type AgentSkill struct {
	Name        string
	Description string
	// Home is the staged ".agents" directory.
	Home string
	// Dir is the staged package directory, Home/skills/<name>.
	Dir string
	// SkillFile is Dir/SKILL.md.
	SkillFile string
}

const (
	maxSkillName        = 64
	maxSkillDescription = 1024
)

var skillNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

// skillMeta is the frontmatter of SKILL.md.
type skillMeta struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// stageSkill validates the package at n.Src and copies it into the
// agent's staging area.
func (d *domain) stageSkill(ctx context.Context, n *Skill, plan *agentPlan) (AgentSkill, error) {
	fail := func(format string, args ...any) (AgentSkill, error) {
		return AgentSkill{}, newError(n.Position, fmt.Sprintf("skill(%q): ", n.Src)+fmt.Sprintf(format, args...))
	}
	// The package is read from the host directory, or from
	// Options.AppFiles when the runtime reads application files there.
	var pkg fs.FS
	var dirName string
	if files := d.rt.opts.AppFiles; files != nil {
		name, err := appFileName(n.Src)
		if err != nil {
			return fail("%v", err)
		}
		// A link is refused, as on the host (os.Lstat below).
		info, err := fs.Lstat(files, name)
		if err != nil {
			return AgentSkill{}, &EvaluationError{Msg: fmt.Sprintf("skill(%q): cannot read the package", n.Src), Pos: n.Position, Err: err}
		}
		if !info.IsDir() {
			return fail("must name a package directory containing SKILL.md, not a %s", filekind.Coarse(info.Mode()))
		}
		if pkg, err = fs.Sub(files, name); err != nil {
			return fail("%v", err)
		}
		dirName = path.Base(name)
	} else {
		base, err := d.cwd()
		if err != nil {
			return AgentSkill{}, &EvaluationError{Msg: "skill(): cannot determine the working directory", Pos: n.Position, Err: err}
		}
		src := n.Src
		if !filepath.IsAbs(src) {
			src = filepath.Join(base, src)
		}
		info, err := os.Lstat(src)
		if err != nil {
			return AgentSkill{}, &EvaluationError{Msg: fmt.Sprintf("skill(%q): cannot read the package", n.Src), Pos: n.Position, Err: err}
		}
		if !info.IsDir() {
			return fail("must name a package directory containing SKILL.md, not a %s", filekind.Coarse(info.Mode()))
		}
		pkg, dirName = os.DirFS(src), filepath.Base(src)
	}
	raw, err := fs.ReadFile(pkg, "SKILL.md")
	if err != nil {
		return fail("the package has no readable root SKILL.md: %v", err)
	}
	meta, err := parseSkillFrontmatter(raw)
	if err != nil {
		return fail("SKILL.md %v", err)
	}
	switch {
	case meta.Name == "":
		return fail("SKILL.md frontmatter must set name")
	case len(meta.Name) > maxSkillName || !skillNamePattern().MatchString(meta.Name):
		return fail("skill name %q must be lowercase letters, digits and single hyphens, at most %d characters", meta.Name, maxSkillName)
	case meta.Name != dirName:
		return fail("skill name %q must equal the package directory name %q", meta.Name, dirName)
	}
	desc := strings.Join(strings.Fields(meta.Description), " ")
	switch {
	case desc == "":
		return fail("SKILL.md frontmatter must set a non-empty description")
	case len([]rune(desc)) > maxSkillDescription:
		return fail("the description has %d characters, more than %d", len([]rune(desc)), maxSkillDescription)
	}
	area := plan.stagingArea()
	root, err := area.root(ctx)
	if err != nil {
		return AgentSkill{}, &EvaluationError{Msg: fmt.Sprintf("skill(%q): cannot create the staging area", n.Src), Pos: n.Position, Err: err}
	}
	rel := ".agents/skills/" + meta.Name
	if err := copyPackage(pkg, func(name string, data []byte, perm os.FileMode) error {
		_, err := area.write(ctx, rel+"/"+name, data, perm)
		return err
	}); err != nil {
		return fail("%v", err)
	}
	join := filepath.Join
	if area.rt != nil {
		join = path.Join
	}
	home := join(root, ".agents")
	dst := join(home, "skills", meta.Name)
	return AgentSkill{Name: meta.Name, Description: desc, Home: home, Dir: dst, SkillFile: join(dst, "SKILL.md")}, nil
}

// parseSkillFrontmatter reads the YAML block between the leading "---"
// lines of SKILL.md.
func parseSkillFrontmatter(raw []byte) (skillMeta, error) {
	var meta skillMeta
	text := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	if !bytes.HasPrefix(text, []byte("---\n")) {
		return meta, fmt.Errorf("must start with a YAML frontmatter block between --- lines")
	}
	rest := text[4:]
	end := bytes.Index(rest, []byte("\n---"))
	if end < 0 {
		return meta, fmt.Errorf("frontmatter is not closed by a --- line")
	}
	if after := rest[end+4:]; len(after) > 0 && after[0] != '\n' {
		return meta, fmt.Errorf("frontmatter is not closed by a --- line")
	}
	if err := yaml.Unmarshal(rest[:end], &meta); err != nil {
		return meta, fmt.Errorf("frontmatter is not valid YAML: %v", err)
	}
	return meta, nil
}

// copyPackage hands every regular file of the package pkg to write with
// its slash-separated relative name, rejecting symbolic links and special
// files (directories are implied by the files' names).
func copyPackage(pkg fs.FS, write func(rel string, data []byte, perm os.FileMode) error) error {
	return fs.WalkDir(pkg, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return nil
		case mode.IsRegular():
			data, err := fs.ReadFile(pkg, p)
			if err != nil {
				return err
			}
			// Owner-executable files (package scripts) stay executable.
			return write(p, data, 0o600|mode.Perm()&0o100)
		default:
			return fmt.Errorf("the package contains %s %q: only regular files and directories are allowed", filekind.Coarse(info.Mode()), p)
		}
	})
}

// skillFragment is the metadata-only system text for providers without
// native skill discovery.
func skillFragment(skills []AgentSkill) string {
	var b strings.Builder
	b.WriteString("Agent Skills are available in this session. When a skill's description matches the task, read its SKILL.md and follow it:")
	for _, s := range skills {
		fmt.Fprintf(&b, "\n- %s: %s (%s)", s.Name, s.Description, s.SkillFile)
	}
	return b.String()
}
