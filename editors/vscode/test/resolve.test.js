'use strict';
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { resolveAml } = require('../src/resolve');

function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aml-vscode-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function executable(dir, name, mode = 0o755) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, '#!/bin/sh\n');
  fs.chmodSync(p, mode);
  return p;
}

test('a bare name is found on PATH, first directory first', { skip: process.platform === 'win32' }, (t) => {
  const a = scratch(t);
  const b = scratch(t);
  executable(b, 'aml');
  const second = executable(a, 'aml');
  assert.deepStrictEqual(resolveAml('aml', { env: { PATH: `${path.join(a, 'missing')}:${a}:${b}` } }), { path: second });
});

test('a file that is not executable is passed over', { skip: process.platform === 'win32' }, (t) => {
  const a = scratch(t);
  const b = scratch(t);
  executable(a, 'aml', 0o644);
  const good = executable(b, 'aml');
  assert.deepStrictEqual(resolveAml('aml', { env: { PATH: `${a}:${b}` } }), { path: good });
});

test('a missing executable says how to install it and which setting to change', () => {
  const r = resolveAml('aml', { env: { PATH: '/nonexistent-aml-dir' } });
  assert.ok(r.error, 'an error');
  assert.match(r.error, /"aml" was not found on PATH/);
  assert.match(r.error, /go install github\.com\/aml-go\/aml\/cmd\/aml@latest/);
  assert.match(r.error, /"aml\.path"/);
});

test('a path setting is used as it is, relative to the workspace, with ~ for home', { skip: process.platform === 'win32' }, (t) => {
  const dir = scratch(t);
  const bin = executable(dir, 'my-aml');
  assert.deepStrictEqual(resolveAml(bin, { env: { PATH: '' } }), { path: bin });
  assert.deepStrictEqual(resolveAml('./my-aml', { env: { PATH: '' }, cwd: dir }), { path: bin });
  assert.deepStrictEqual(resolveAml('~/my-aml', { env: { PATH: '' }, home: dir }), { path: bin });
  const missing = resolveAml(path.join(dir, 'nope'), { env: {} });
  assert.match(missing.error, /does not exist or cannot be run/);
  assert.ok(missing.error.includes(path.join(dir, 'nope')));
});

test('a directory is not an executable', (t) => {
  const dir = scratch(t);
  fs.mkdirSync(path.join(dir, 'aml'));
  assert.ok(resolveAml('aml', { env: { PATH: dir }, platform: 'linux' }).error);
});

test('Windows: Path with ; and the PATHEXT extensions', () => {
  const files = new Set(['C:\\tools\\aml.exe']);
  const fake = {
    statSync: (p) => {
      if (!files.has(p)) {
        throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
      }
      return { isFile: () => true };
    },
    accessSync: () => { throw new Error('Windows has no execute bit'); },
  };
  const r = resolveAml('aml', { env: { Path: 'C:\\nowhere;C:\\tools', PATHEXT: '.COM;.EXE' }, platform: 'win32', fs: fake });
  assert.deepStrictEqual(r, { path: 'C:\\tools\\aml.exe' });
  assert.ok(resolveAml('aml', { env: { Path: 'C:\\nowhere' }, platform: 'win32', fs: fake }).error);
});
