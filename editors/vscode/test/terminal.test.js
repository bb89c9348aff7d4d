'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { quote, commandLine } = require('../src/terminal');

test('plain arguments stay as they are', () => {
  assert.strictEqual(commandLine('/usr/local/bin/aml', ['run', '/w/review.star'], 'linux'), '/usr/local/bin/aml run /w/review.star');
});

test('POSIX quoting keeps spaces, quotes and $ literal', () => {
  assert.strictEqual(quote("it's $HOME/a b", 'linux'), `'it'\\''s $HOME/a b'`);
  assert.strictEqual(commandLine('/opt/my tools/aml', ['test', '/w/x.star'], 'darwin'), `'/opt/my tools/aml' test /w/x.star`);
});

test('PowerShell quoting and the call operator', () => {
  assert.strictEqual(commandLine('C:\\Program Files\\aml\\aml.exe', ['run', "C:\\w\\it's.star"], 'win32'),
    `& 'C:\\Program Files\\aml\\aml.exe' run 'C:\\w\\it''s.star'`);
  assert.strictEqual(commandLine('C:\\go\\bin\\aml.exe', ['run', 'C:\\w\\a.star'], 'win32'), 'C:\\go\\bin\\aml.exe run C:\\w\\a.star');
});
