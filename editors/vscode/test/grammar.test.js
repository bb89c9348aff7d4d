'use strict';
// The TextMate grammar tokenized by the engine VS Code uses
// (vscode-textmate with the Oniguruma WebAssembly build).
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const textmate = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const grammarPath = path.join(__dirname, '..', 'syntaxes', 'starlark.tmLanguage.json');

async function loadGrammar() {
  const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm')).buffer;
  await oniguruma.loadWASM(wasm);
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scope) => scope === 'source.starlark.aml'
      ? textmate.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath)
      : null,
  });
  return registry.loadGrammar('source.starlark.aml');
}

// tokens returns, for each line, [text, innermost scope] pairs.
function tokens(grammar, text) {
  let state = textmate.INITIAL;
  const out = [];
  for (const line of text.split('\n')) {
    const r = grammar.tokenizeLine(line, state);
    for (const t of r.tokens) {
      const s = line.slice(t.startIndex, t.endIndex);
      if (s.trim()) {
        out.push([s, t.scopes[t.scopes.length - 1]]);
      }
    }
    state = r.ruleStack;
  }
  return out;
}

function scopeOf(toks, text) {
  const t = toks.find(([s]) => s === text);
  assert.ok(t, `no token ${JSON.stringify(text)} in ${JSON.stringify(toks)}`);
  return t[1];
}

test('builtins, keywords, strings, parameters and comments are told apart', async () => {
  const g = await loadGrammar();
  const toks = tokens(g, [
    'load("@std/text", "dedent")  # the helpers',
    '',
    'def main():',
    '    box = docker_sandbox(image = "alpine")',
    '    if len(x) > 0 and not None:',
    '        return agent("Review", provider = opencode_agent(), max_turns = 3)',
    '    return sandbox(script("echo hi", shell = "sh"), schema.object(a = schema.string()))',
  ].join('\n'));
  assert.strictEqual(scopeOf(toks, 'load'), 'keyword.other.load.starlark');
  assert.strictEqual(scopeOf(toks, '# the helpers'), 'comment.line.number-sign.starlark');
  assert.strictEqual(scopeOf(toks, 'def'), 'storage.type.function.starlark');
  assert.strictEqual(scopeOf(toks, 'main'), 'entity.name.function.starlark');
  assert.strictEqual(scopeOf(toks, 'docker_sandbox'), 'support.function.builtin.aml');
  assert.strictEqual(scopeOf(toks, 'agent'), 'support.function.builtin.aml');
  assert.strictEqual(scopeOf(toks, 'schema'), 'support.function.builtin.aml');
  assert.strictEqual(scopeOf(toks, 'len'), 'support.function.builtin.starlark');
  assert.strictEqual(scopeOf(toks, 'if'), 'keyword.control.flow.starlark');
  assert.strictEqual(scopeOf(toks, 'and'), 'keyword.operator.logical.starlark');
  assert.strictEqual(scopeOf(toks, 'None'), 'constant.language.starlark');
  assert.strictEqual(scopeOf(toks, '3'), 'constant.numeric.starlark');
  assert.strictEqual(scopeOf(toks, 'provider'), 'variable.parameter.starlark');
  assert.strictEqual(scopeOf(toks, 'alpine'), 'string.quoted.double.starlark');
});

test('triple-quoted strings span lines, and # inside a string is not a comment', async () => {
  const g = await loadGrammar();
  const toks = tokens(g, 'x = """first\n# not a comment\nlast"""\ny = r\'\\d+\' # real');
  assert.strictEqual(scopeOf(toks, '# not a comment'), 'string.quoted.triple.double.starlark');
  assert.strictEqual(scopeOf(toks, 'last'), 'string.quoted.triple.double.starlark');
  assert.strictEqual(scopeOf(toks, '# real'), 'comment.line.number-sign.starlark');
});

test('an unterminated string ends with its line', async () => {
  const g = await loadGrammar();
  const toks = tokens(g, 'x = "open\ndef main():');
  assert.strictEqual(scopeOf(toks, 'def'), 'storage.type.function.starlark');
});

test('a name that only starts like a builtin is not one', async () => {
  const g = await loadGrammar();
  const toks = tokens(g, 'agents = my_agent(agentic = 1)');
  assert.notStrictEqual(scopeOf(toks, 'my_agent'), 'support.function.builtin.aml');
  assert.strictEqual(scopeOf(toks, 'agentic'), 'variable.parameter.starlark');
});
