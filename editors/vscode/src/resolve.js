'use strict';
// Finding the aml executable the aml.path setting names. Nothing here
// needs VS Code, so the tests run it under plain Node.

const fs = require('fs');
const os = require('os');
const path = require('path');

const installHint =
  'Install it with `go install github.com/aml-go/aml/cmd/aml@latest` ' +
  '(then make sure $(go env GOPATH)/bin is on PATH), or set "aml.path" to the executable.';

// isExecutable reports whether p is a regular file this user may run.
function isExecutable(p, platform, fileSystem) {
  try {
    const st = fileSystem.statSync(p);
    if (!st.isFile()) {
      return false;
    }
    if (platform === 'win32') {
      return true;
    }
    fileSystem.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// resolveAml turns the setting into an absolute executable path:
// { path } when found, { error } with what to do when not. A setting with
// a directory separator is a path (relative ones against cwd); a bare
// name is looked up on env.PATH (with PATHEXT on Windows).
function resolveAml(setting, options = {}) {
  const env = options.env || process.env;
  const platform = options.platform || process.platform;
  const fileSystem = options.fs || fs;
  const home = options.home || os.homedir();
  const cwd = options.cwd || process.cwd();
  const p = platform === 'win32' ? path.win32 : path.posix;
  let name = (setting || '').trim() || 'aml';
  if (name === '~' || name.startsWith('~/')) {
    name = p.join(home, name.slice(1));
  }
  const exts = platform === 'win32'
    ? ['', ...(env.PATHEXT || '.EXE;.CMD;.BAT').split(';').filter(Boolean).map((e) => e.toLowerCase())]
    : [''];
  if (name.includes('/') || (platform === 'win32' && name.includes('\\'))) {
    const abs = p.resolve(cwd, name);
    for (const ext of exts) {
      if (isExecutable(abs + ext, platform, fileSystem)) {
        return { path: abs + ext };
      }
    }
    return { error: `The aml executable "${abs}" (from the "aml.path" setting) does not exist or cannot be run. ${installHint}` };
  }
  const dirs = (env.PATH || env.Path || '').split(platform === 'win32' ? ';' : ':').filter(Boolean);
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = p.join(dir, name + ext);
      if (isExecutable(candidate, platform, fileSystem)) {
        return { path: candidate };
      }
    }
  }
  return { error: `"${name}" was not found on PATH, so the AML language server cannot start. ${installHint}` };
}

module.exports = { resolveAml, installHint };
