package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// skillPath is the authoring skill for coding agents, relative to this
// package.
const skillPath = "../../skills/aml-starlark/SKILL.md"

// skillBlock is one fenced code block of the skill.
type skillBlock struct {
	lang  string // the first word of the info string
	title string // its title="..." attribute, or ""
	line  int    // line of the opening fence, from 1
	body  string
}

// file is the name the block is written to: its title, or one made from
// its line.
func (b skillBlock) file() string {
	if b.title != "" {
		return b.title
	}
	return fmt.Sprintf("skill_block_%d.star", b.line)
}

var skillTitle = regexp.MustCompile(`\btitle="([^"]*)"`)

// skillBlocks returns the fenced code blocks of a Markdown document.
func skillBlocks(t *testing.T, src string) []skillBlock {
	t.Helper()
	var (
		out  []skillBlock
		cur  *skillBlock
		body strings.Builder
	)
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			info, ok := strings.CutPrefix(trimmed, "```")
			if !ok {
				continue
			}
			cur = &skillBlock{line: i + 1}
			if f := strings.Fields(info); len(f) > 0 {
				cur.lang = f[0]
			}
			if m := skillTitle.FindStringSubmatch(info); m != nil {
				cur.title = m[1]
			}
			body.Reset()
			continue
		}
		if trimmed == "```" {
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	if cur != nil {
		t.Fatalf("%s:%d: the code block is not closed", skillPath, cur.line)
	}
	return out
}

// TestSkillFrontMatter: the skill is an Agent Skills package that skill()
// accepts: YAML front matter with its directory's name and a description.
func TestSkillFrontMatter(t *testing.T) {
	src, err := os.ReadFile(skillPath)
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := strings.CutPrefix(string(src), "---\n")
	if !ok {
		t.Fatalf("%s does not start with YAML front matter (---)", skillPath)
	}
	front, _, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		t.Fatalf("%s: the front matter is not closed by a --- line", skillPath)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(front, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if fields["name"] != "aml-starlark" {
		t.Errorf("front matter name is %q, want aml-starlark", fields["name"])
	}
	if d := fields["description"]; d == "" || len(d) > 1024 {
		t.Errorf("front matter description has %d characters, want 1 to 1024", len(d))
	}

	// skill() stages the package for an agent session.
	dir, err := filepath.Abs(filepath.Dir(skillPath))
	if err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(t.TempDir(), "stage.star")
	prog := fmt.Sprintf(`configure(agent_provider = deterministic_agent(respond = lambda req: ",".join(req.skills)))

def main():
    return agent(skill(%q), "Write a workflow.")
`, dir)
	if err := os.WriteFile(wf, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := Main([]string{"run", "--quiet", wf}, nil, &stdout, &stderr); code != exitOK || strings.TrimSpace(stdout.String()) != "aml-starlark" {
		t.Errorf("aml run with skill(%q): exit %d, stdout %q, stderr:\n%s", dir, code, stdout.String(), stderr.String())
	}
}

// TestSkillBlocks keeps the examples of the skill true. Every block is
// written to one directory (under its title="..." name when it has one,
// so that blocks can load() each other), then:
//
//   - a python block must pass aml check with no error;
//   - a python-wrong block must fail aml check, and when the next block is
//     a console transcript "$ aml check NAME", the output must be exactly
//     the lines after that command;
//   - a block titled NAME.golden is the golden file of the python block
//     NAME.star, which must pass aml test.
func TestSkillBlocks(t *testing.T) {
	src, err := os.ReadFile(skillPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := skillBlocks(t, string(src))
	dir := t.TempDir()
	written := map[string]skillBlock{}
	for _, b := range blocks {
		if b.lang != "python" && b.lang != "python-wrong" && !strings.HasSuffix(b.title, ".golden") {
			continue
		}
		name := b.file()
		if !filepath.IsLocal(name) {
			t.Fatalf("%s:%d: title %q is not a local path", skillPath, b.line, name)
		}
		if prev, dup := written[name]; dup {
			t.Fatalf("%s:%d: title %q is also used at line %d", skillPath, b.line, name, prev.line)
		}
		written[name] = b
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// check runs aml check on a written block; paths in its output are
	// relative to the block directory.
	check := func(b skillBlock) (int, string) {
		var stdout, stderr strings.Builder
		code := Main([]string{"check", filepath.Join(dir, filepath.FromSlash(b.file()))}, nil, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		return code, strings.ReplaceAll(out, dir+string(filepath.Separator), "")
	}

	var good, wrong, transcripts, goldens int
	for i, b := range blocks {
		switch {
		case b.lang == "python":
			good++
			code, out := check(b)
			if code != exitOK || strings.Contains(out, "error:") {
				t.Errorf("%s:%d: aml check %s: exit %d, want %d and no error:\n%s\n%s",
					skillPath, b.line, b.file(), code, exitOK, out, b.body)
			}
		case b.lang == "python-wrong":
			wrong++
			code, out := check(b)
			if code != exitFailure {
				t.Errorf("%s:%d: aml check %s: exit %d, want %d (the block shows a mistake):\n%s\n%s",
					skillPath, b.line, b.file(), code, exitFailure, out, b.body)
			}
			if i+1 == len(blocks) || blocks[i+1].lang != "console" {
				continue
			}
			next := blocks[i+1]
			cmd, want, _ := strings.Cut(next.body, "\n")
			if cmd != "$ aml check "+b.file() {
				continue
			}
			transcripts++
			if code == exitFailure && out != want {
				t.Errorf("%s:%d: the transcript of aml check %s is not its output\nshown:\n%s\nactual:\n%s",
					skillPath, next.line, b.file(), want, out)
			}
		case strings.HasSuffix(b.title, ".golden"):
			goldens++
			star := strings.TrimSuffix(b.title, ".golden") + ".star"
			if wf, ok := written[star]; !ok || wf.lang != "python" {
				t.Errorf("%s:%d: golden %s has no python block titled %s", skillPath, b.line, b.title, star)
				continue
			}
			var stdout, stderr strings.Builder
			if code := Main([]string{"test", filepath.Join(dir, filepath.FromSlash(star))}, nil, &stdout, &stderr); code != exitOK {
				t.Errorf("%s:%d: aml test %s: exit %d, want %d:\n%s%s",
					skillPath, b.line, star, code, exitOK, stdout.String(), stderr.String())
			}
		}
	}
	t.Logf("%d python blocks, %d python-wrong blocks (%d with transcripts), %d goldens", good, wrong, transcripts, goldens)
	if good < 10 {
		t.Errorf("only %d python blocks in %s, want at least 10", good, skillPath)
	}
	if wrong < 10 || transcripts < wrong {
		t.Errorf("%d python-wrong blocks, %d with an aml check transcript, in %s; want at least 10, each with one", wrong, transcripts, skillPath)
	}
	if goldens < 1 {
		t.Errorf("no golden file shown in %s", skillPath)
	}
}
