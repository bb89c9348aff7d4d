'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { mainLine, lensLines, isTestFile } = require('../src/lenses');

test('the lenses go on the top-level def main', () => {
  const text = 'load("@std/text", "x")\n\ndef helper():\n    def main():\n        pass\n\ndef main():\n    return agent("hi")\n';
  assert.strictEqual(mainLine(text), 6);
  assert.deepStrictEqual(lensLines(text), [6]);
});

test('a module without main has no lenses', () => {
  assert.deepStrictEqual(lensLines('def review(x):\n    return agent(x)\n'), []);
  assert.deepStrictEqual(lensLines('maintenance = 1\ndef mainly():\n    pass\n'), []);
});

test('CRLF files', () => {
  assert.strictEqual(mainLine('x = 1\r\ndef main ():\r\n    pass\r\n'), 1);
});

test('test files are *_test.star or have a golden sibling', () => {
  const exists = (p) => p === '/w/review.golden';
  assert.ok(isTestFile('/w/flow_test.star', exists));
  assert.ok(isTestFile('/w/review.star', exists));
  assert.ok(!isTestFile('/w/other.star', exists));
  assert.ok(!isTestFile('/w/review.golden', exists));
});
