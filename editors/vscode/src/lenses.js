'use strict';
// Where the "Run workflow" and "Run tests" lenses go. Pure text
// analysis, so the tests run it under plain Node.

// mainLine returns the 0-based line of the top-level `def main(`, or -1.
function mainLine(text) {
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    if (/^def\s+main\s*\(/.test(lines[i])) {
      return i;
    }
  }
  return -1;
}

// lensLines returns where to put the lenses of a document: the line of
// main() (a workflow) or none (a module that only defines things to load).
function lensLines(text) {
  const line = mainLine(text);
  return line < 0 ? [] : [line];
}

module.exports = { mainLine, lensLines };

// isTestFile reports whether aml test runs the file: a *_test.star file,
// or a .star file with a sibling .golden file (exists is fs.existsSync).
function isTestFile(fileName, exists) {
  if (!fileName.endsWith('.star')) {
    return false;
  }
  return fileName.endsWith('_test.star') || exists(fileName.slice(0, -'.star'.length) + '.golden');
}

module.exports.isTestFile = isTestFile;
