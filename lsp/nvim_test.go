package lsp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-go/aml/internal/testbin"
)

// nvimLua drives one session from headless Neovim against the real
// "aml lsp": it starts the client on the buffer Neovim was opened with,
// waits for the diagnostics, asks for hover, completion, definition,
// document highlights, folding ranges and formatting (applying the edits
// to the buffer), stops the client and
// writes what it saw as JSON to $AML_NVIM_RESULT. Every step runs under
// pcall, and the result file is written and Neovim quits whatever
// happens, so that the test never waits on an editor stuck in a prompt.
// It works with Neovim 0.7 (vim.lsp.start_client, client.request_sync)
// and newer (vim.lsp.start and the client:method() calls from 0.11).
const nvimLua = `
local out = { steps = {} }
local result_path = os.getenv("AML_NVIM_RESULT")
local new_api = vim.fn.has("nvim-0.11") == 1

local function finish()
  local ok, encoded = pcall(vim.fn.json_encode, out)
  if not ok then
    encoded = vim.fn.json_encode({ error = "json_encode: " .. tostring(encoded) .. "; " .. vim.inspect(out) })
  end
  vim.fn.writefile({ encoded }, result_path)
  vim.cmd("qa!")
end

local function call(client, name, ...)
  if new_api then
    return client[name](client, ...)
  end
  return client[name](...)
end

local function run()
  local cfg = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv("AML_NVIM_CONFIG")), "\n"))
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  out.uri = uri
  out.nvim = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) .. "." .. tostring(vim.version().patch)

  local config = {
    name = "aml",
    cmd = { cfg.aml, "lsp" },
    root_dir = cfg.dir,
    on_exit = function(code, signal)
      out.exit_code = code
      out.exit_signal = signal
    end,
  }
  local id
  if vim.lsp.start and new_api then
    id = vim.lsp.start(config, { bufnr = bufnr })
  else
    id = vim.lsp.start_client(config)
    if id then
      vim.lsp.buf_attach_client(bufnr, id)
    end
  end
  if not id then
    error("the client did not start")
  end
  table.insert(out.steps, "started")

  local client
  local got = vim.wait(cfg.timeout_ms, function()
    client = vim.lsp.get_client_by_id(id)
    return client ~= nil and client.initialized and #vim.diagnostic.get(bufnr) > 0
  end, 20)
  if not got then
    error("no diagnostics within " .. cfg.timeout_ms .. " ms (client " .. vim.inspect(client ~= nil) .. ")")
  end
  out.offset_encoding = client.offset_encoding
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local code = d.code
    if code == nil and d.user_data and d.user_data.lsp then
      code = d.user_data.lsp.code
    end
    table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, end_col = d.end_col, message = d.message, code = code, severity = d.severity })
  end
  table.insert(out.steps, "diagnostics")

  local function request(method, params)
    local res, err = call(client, "request_sync", method, params, cfg.timeout_ms, bufnr)
    if not res then
      error(method .. ": " .. tostring(err))
    end
    if res.err then
      error(method .. ": " .. vim.inspect(res.err))
    end
    table.insert(out.steps, method)
    return res.result
  end
  local function at(pos)
    return { textDocument = { uri = uri }, position = { line = pos[1], character = pos[2] } }
  end

  local hover = request("textDocument/hover", at(cfg.hover))
  if type(hover) == "table" then
    local c = hover.contents
    if type(c) == "string" then
      out.hover = c
    elseif type(c) == "table" then
      out.hover = c.value or vim.inspect(c)
    end
  end

  local completion = request("textDocument/completion", at(cfg.completion))
  out.completion = {}
  if type(completion) == "table" then
    local items = completion.items or completion
    for _, item in ipairs(items) do
      table.insert(out.completion, item.label)
    end
  end

  local def = request("textDocument/definition", at(cfg.definition))
  if type(def) == "table" then
    local loc = def
    if loc.uri == nil and loc.targetUri == nil then
      loc = def[1]
    end
    if loc then
      local rng = loc.targetSelectionRange or loc.range
      out.definition = { uri = loc.uri or loc.targetUri, line = rng.start.line, character = rng.start.character }
    end
    out.definition_raw = vim.inspect(def)
  end

  local highlights = request("textDocument/documentHighlight", at(cfg.highlight))
  out.highlights = {}
  if type(highlights) == "table" then
    for _, h in ipairs(highlights) do
      table.insert(out.highlights, { line = h.range.start.line, character = h.range.start.character, kind = h.kind })
    end
  end

  local folds = request("textDocument/foldingRange", { textDocument = { uri = uri } })
  out.folds = {}
  if type(folds) == "table" then
    for _, f in ipairs(folds) do
      table.insert(out.folds, { start_line = f.startLine, end_line = f.endLine, kind = f.kind })
    end
  end

  local edits = request("textDocument/formatting", { textDocument = { uri = uri }, options = { tabSize = 4, insertSpaces = true } })
  if type(edits) == "table" then
    out.format_edits = #edits
    vim.lsp.util.apply_text_edits(edits, bufnr, client.offset_encoding or "utf-16")
  end
  out.formatted = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)

  call(client, "stop")
  out.stopped = vim.wait(cfg.stop_timeout_ms, function()
    return call(client, "is_stopped") and out.exit_code ~= nil
  end, 20)
  table.insert(out.steps, "stopped")
end

local ok, err = pcall(run)
if not ok then
  out.error = tostring(err)
end
local ok2, err2 = pcall(finish)
if not ok2 then
  io.stderr:write("finish: " .. tostring(err2) .. "\n")
  vim.cmd("qa!")
end
`

// nvimResult is what the Lua script writes.
type nvimResult struct {
	Error          string   `json:"error"`
	Steps          []string `json:"steps"`
	Nvim           string   `json:"nvim"`
	URI            string   `json:"uri"`
	OffsetEncoding string   `json:"offset_encoding"`
	Diagnostics    []struct {
		Lnum     int    `json:"lnum"`
		Col      int    `json:"col"`
		EndCol   int    `json:"end_col"`
		Message  string `json:"message"`
		Code     any    `json:"code"`
		Severity int    `json:"severity"`
	} `json:"diagnostics"`
	Hover      string   `json:"hover"`
	Completion []string `json:"completion"`
	Definition *struct {
		URI       string `json:"uri"`
		Line      int    `json:"line"`
		Character int    `json:"character"`
	} `json:"definition"`
	Highlights []struct {
		Line      int `json:"line"`
		Character int `json:"character"`
		Kind      int `json:"kind"`
	} `json:"highlights"`
	Folds []struct {
		StartLine int    `json:"start_line"`
		EndLine   int    `json:"end_line"`
		Kind      string `json:"kind"`
	} `json:"folds"`
	FormatEdits int      `json:"format_edits"`
	Formatted   []string `json:"formatted"`
	Stopped     bool     `json:"stopped"`
	ExitCode    *int     `json:"exit_code"`
}

// TestNeovim runs the real "aml lsp" binary under headless Neovim's
// built-in LSP client: diagnostics, hover, completion, go to definition
// across load(), document highlights, folding ranges and formatting,
// then a clean shutdown.
func TestNeovim(t *testing.T) {
	if testing.Short() {
		t.Skip("the Neovim end-to-end test builds aml and starts an editor: skipped under -short")
	}
	nvim, err := exec.LookPath("nvim")
	if err != nil {
		t.Skip("neovim is not installed (nvim not on PATH): apt-get install neovim to run the editor end-to-end test")
	}

	bin := testbin.Build(t, "github.com/aml-go/aml/cmd/aml", testbin.Options{})

	dir := t.TempDir()
	main := "load(\"lib.star\", \"helper\")\n" +
		"\n" +
		"def main():\n" +
		"    return agent(helper( \"the diff\" ), sandbox(acess = \"read-only\"),model='m',provider=deterministic_agent())\n"
	files := map[string]string{
		"lib.star":  "def helper(topic):\n    \"\"\"Returns a prompt.\"\"\"\n    return \"Review \" + topic\n",
		"main.star": main,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Positions on line 3 (0-based), found in the text rather than counted.
	line := strings.Split(main, "\n")[3]
	col := func(s string, off int) int {
		i := strings.Index(line, s)
		if i < 0 {
			t.Fatalf("%q not in %q", s, line)
		}
		return i + off
	}
	cfg := map[string]any{
		"aml":             bin,
		"dir":             dir,
		"timeout_ms":      20000,
		"stop_timeout_ms": 3000,
		"hover":           []int{3, col("agent(", 2)},
		"completion":      []int{3, col("sandbox(", len("sandbox("))},
		"definition":      []int{3, col("helper(", 2)},
		"highlight":       []int{3, col("helper(", 1)},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cfgPath := filepath.Join(work, "config.json")
	script := filepath.Join(work, "script.lua")
	resultPath := filepath.Join(work, "result.json")
	if err := os.WriteFile(cfgPath, cfgJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(nvimLua), 0o644); err != nil {
		t.Fatal(err)
	}

	want, err := exec.Command(bin, "fmt", filepath.Join(dir, "main.star")).Output()
	if err != nil {
		t.Fatalf("aml fmt main.star: %v", err)
	}
	if string(want) == main {
		t.Fatalf("aml fmt leaves main.star as it is; the test needs something to format")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "--clean", "-n", "-i", "NONE",
		filepath.Join(dir, "main.star"), "-c", "luafile "+script)
	cmd.Dir = dir
	// Neovim keeps its log, state and cache below the test's directory.
	cmd.Env = append(os.Environ(),
		"AML_NVIM_CONFIG="+cfgPath,
		"AML_NVIM_RESULT="+resultPath,
		"XDG_CONFIG_HOME="+filepath.Join(work, "config"),
		"XDG_DATA_HOME="+filepath.Join(work, "data"),
		"XDG_STATE_HOME="+filepath.Join(work, "state"),
		"XDG_CACHE_HOME="+filepath.Join(work, "cache"),
		"NVIM_LOG_FILE="+filepath.Join(work, "nvim.log"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	raw, readErr := os.ReadFile(resultPath)
	dump := func() {
		t.Logf("nvim exited after %v: %v", time.Since(start).Round(time.Millisecond), runErr)
		t.Logf("nvim stdout:\n%s", stdout.String())
		t.Logf("nvim stderr:\n%s", stderr.String())
		t.Logf("result JSON:\n%s", raw)
		if log, err := os.ReadFile(filepath.Join(work, "cache", "nvim", "lsp.log")); err == nil {
			t.Logf("lsp.log:\n%s", log)
		} else if log, err := os.ReadFile(filepath.Join(work, "state", "nvim", "lsp.log")); err == nil {
			t.Logf("lsp.log:\n%s", log)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		dump()
		t.Fatal("nvim did not finish within 90s")
	}
	if readErr != nil {
		dump()
		t.Fatalf("no result from the Lua script: %v", readErr)
	}
	var res nvimResult
	if err := json.Unmarshal(raw, &res); err != nil {
		dump()
		t.Fatalf("result JSON: %v", err)
	}
	if res.Error != "" {
		dump()
		t.Fatalf("the Lua script failed after steps %v: %s", res.Steps, res.Error)
	}
	if runErr != nil {
		dump()
		t.Fatalf("nvim: %v", runErr)
	}
	failed := false
	errorf := func(format string, args ...any) {
		t.Helper()
		failed = true
		t.Errorf(format, args...)
	}

	if len(res.Diagnostics) != 1 {
		errorf("diagnostics = %+v, want one", res.Diagnostics)
	} else if d := res.Diagnostics[0]; d.Code != "unknown-keyword" || !strings.Contains(d.Message, `"acess"`) || d.Lnum != 3 || d.Col != col("acess", 0) {
		errorf("diagnostic = %+v, want unknown-keyword about \"acess\" at 3:%d", d, col("acess", 0))
	}
	if !strings.Contains(res.Hover, "agent(*children") {
		errorf("hover over agent = %q, want the catalog's signature agent(*children, ...)", res.Hover)
	}
	found := false
	for _, l := range res.Completion {
		if l == "access" || strings.HasPrefix(l, "access") {
			found = true
		}
	}
	if !found {
		errorf("completion after sandbox( = %q, want the keyword access", res.Completion)
	}
	if d := res.Definition; d == nil || !strings.HasSuffix(d.URI, "/lib.star") || d.Line != 0 {
		errorf("definition of helper = %+v, want lib.star line 0 (the def)", d)
	}
	// helper is bound by the load on line 0 (a write) and called on
	// line 3 (a read); the def of main folds lines 2-3.
	var hl []string
	for _, h := range res.Highlights {
		hl = append(hl, fmt.Sprintf("%d:%d/%d", h.Line, h.Character, h.Kind))
	}
	if got, want := strings.Join(hl, " "), fmt.Sprintf("0:17/3 3:%d/2", col("helper(", 0)); got != want {
		errorf("highlights of helper = %s, want %s (line:character/kind, 3 write, 2 read)", got, want)
	}
	foundFold := false
	for _, f := range res.Folds {
		if f.StartLine == 2 && f.EndLine == 3 && f.Kind == "" {
			foundFold = true
		}
	}
	if !foundFold {
		errorf("folding ranges = %+v, want lines 2-3 for the def of main", res.Folds)
	}
	if got := strings.Join(res.Formatted, "\n") + "\n"; got != string(want) {
		errorf("buffer after formatting (%d edits):\n%s\nwant (aml fmt):\n%s", res.FormatEdits, got, want)
	}
	// client.stop() sends shutdown and then exit; the server should then
	// end with status 0. It does not yet: on exit the server closes its
	// connection, but Close of the stdin/stdout stream of "aml lsp" does
	// nothing, so Serve waits for stdin to reach EOF, which happens only
	// when Neovim itself quits. Until that is fixed a server still running
	// after stop() is only logged; a wrong exit status fails.
	switch {
	case res.Stopped && res.ExitCode != nil && *res.ExitCode != 0:
		errorf("after client.stop() the server exited with status %d, want 0 after shutdown and exit", *res.ExitCode)
	case !res.Stopped:
		errorf("aml lsp was still running 3s after client.stop() (shutdown, exit): the server must end on exit")
	}
	if failed {
		dump()
	} else {
		t.Logf("nvim %s: %s (%v)", res.Nvim, strings.Join(res.Steps, ", "), time.Since(start).Round(time.Millisecond))
	}
}
