package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/rogpeppe/go-internal/testscript"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated pages of docs/reference")

// TestGeneratedDocs fails when a generated page of docs/reference is not
// what the source generates today: the builtin reference (the catalog
// aml doc prints) and the command reference (the commands' help and the
// exit-code tables). -update-docs rewrites them.
func TestGeneratedDocs(t *testing.T) {
	for _, page := range []struct {
		path string
		gen  func() []byte
	}{
		{"builtins.md", builtinsMarkdown},
		{"cli.md", cliMarkdown},
	} {
		path := filepath.Join("..", "..", "docs", "reference", page.path)
		want := page.gen()
		if *updateDocs {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./internal/cli -run TestGeneratedDocs -update-docs writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/reference/%s is stale: the source generates another text; run go test ./internal/cli -run TestGeneratedDocs -update-docs and commit the result", page.path)
		}
	}
}

// docFiles are the Markdown files of the project whose links and
// runnable examples the tests check, relative to the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	files := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "editors/vscode/README.md", "skills/aml-starlark/SKILL.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// fence is one fenced code block of a Markdown file.
type fence struct {
	info string // the info string: "python runnable", "console", ...
	body string
	line int // the line of the opening fence
	// next is the index of the following fence when only blank lines
	// separate the two, else -1.
	next int
}

// markdown splits a Markdown text into its prose lines (with fenced
// blocks blanked out) and its fenced blocks.
func markdown(text string) (prose []string, fences []fence) {
	lines := strings.Split(text, "\n")
	prose = make([]string, len(lines))
	open := -1
	var body []string
	lastEnd := -10
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if open < 0 {
			if strings.HasPrefix(trimmed, "```") {
				open = i
				body = nil
				f := fence{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 1, next: -1}
				if len(fences) > 0 && lastEnd >= 0 && strings.TrimSpace(strings.Join(lines[lastEnd+1:i], "")) == "" {
					fences[len(fences)-1].next = len(fences)
				}
				fences = append(fences, f)
				continue
			}
			prose[i] = l
			continue
		}
		if trimmed == "```" {
			fences[len(fences)-1].body = strings.Join(body, "\n") + "\n"
			open = -1
			lastEnd = i
			continue
		}
		body = append(body, l)
	}
	return prose, fences
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// slug is GitHub's anchor of a heading's text.
func slug(heading string) string {
	heading = strings.ToLower(strings.ReplaceAll(heading, "`", ""))
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown text.
func anchors(text string) map[string]bool {
	prose, _ := markdown(text)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestDocsLinks fails on a relative link of the project's Markdown
// that leads nowhere: a missing file, or a missing heading of a page.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				t.Errorf("%s is missing", f)
				continue
			}
			t.Fatal(err)
		}
		prose, _ := markdown(string(text))
		for i, l := range prose {
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				dest := filepath.Join(root, filepath.Dir(f), filepath.FromSlash(path))
				if path == "" {
					dest = filepath.Join(root, f)
				}
				info, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: the link %q leads to no file", f, i+1, target)
					continue
				}
				if frag == "" {
					continue
				}
				if info.IsDir() || !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: the link %q has an anchor but leads to no Markdown page", f, i+1, target)
					continue
				}
				page, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(string(page))[frag] {
					t.Errorf("%s:%d: the link %q names a heading its page does not have", f, i+1, target)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found", checked)
	}
	t.Logf("%d relative links checked", checked)
}

// TestDocsExamples runs every fenced example of the documentation
// marked runnable ("```python runnable"): as aml run runs it, in a
// fresh directory; when a "```console" block follows at once and opens
// with "$ aml run FILE", the run must print the rest of that block on
// stdout exactly, and FILE names the example. An example marked wrong
// ("```python wrong") must be followed by "$ aml check FILE" and the
// findings aml check prints for it, exactly (and it exits 1).
func TestDocsExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	dir := t.TempDir()
	n := 0
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // TestDocsLinks reports it
		}
		_, fences := markdown(string(text))
		for _, fc := range fences {
			if fc.info == "python wrong" {
				n++
				if fc.next < 0 || fences[fc.next].info != "console" {
					t.Errorf("%s:%d: an example marked wrong needs the console block of aml check right after it", f, fc.line)
					continue
				}
				first, rest, _ := strings.Cut(fences[fc.next].body, "\n")
				fields := strings.Fields(first)
				if len(fields) != 4 || fields[0] != "$" || fields[1] != "aml" || fields[2] != "check" {
					t.Errorf("%s:%d: the console block after an example marked wrong must open with $ aml check FILE", f, fc.line)
					continue
				}
				script := fmt.Sprintf("# %s:%d\nexitcode 1 aml check %s\ncmp stdout want.txt\n-- %s --\n%s-- want.txt --\n%s", f, fc.line, fields[3], fields[3], fc.body, rest)
				base := strings.NewReplacer("/", "_", ".md", "").Replace(f)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%d.txtar", base, fc.line)), []byte(script), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if fc.info != "python runnable" {
				continue
			}
			n++
			name := "example.star"
			var script strings.Builder
			fmt.Fprintf(&script, "# %s:%d\n", f, fc.line)
			args := "run --quiet " + name
			want := ""
			if fc.next >= 0 && fences[fc.next].info == "console" {
				first, rest, _ := strings.Cut(fences[fc.next].body, "\n")
				if fields := strings.Fields(first); len(fields) >= 3 && fields[0] == "$" && fields[1] == "aml" && fields[2] == "run" {
					name = fields[len(fields)-1]
					args = "run --quiet " + strings.Join(fields[3:], " ")
					want = rest
				}
			}
			fmt.Fprintf(&script, "exec aml %s\n", args)
			if want != "" {
				script.WriteString("cmp stdout want.txt\n")
			}
			fmt.Fprintf(&script, "-- %s --\n%s", name, fc.body)
			if want != "" {
				fmt.Fprintf(&script, "-- want.txt --\n%s", want)
			}
			base := strings.NewReplacer("/", "_", ".md", "").Replace(f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%d.txtar", base, fc.line)), []byte(script.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d runnable examples found in the documentation", n)
	}
	t.Logf("%d runnable examples", n)
	params := scriptParams(dir)
	testscript.Run(t, params)
}
