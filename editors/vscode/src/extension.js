'use strict';
// The AML extension: it starts `aml lsp` for .star files and adds
// commands and code lenses that run a workflow and its tests in a
// terminal.

const fs = require('fs');
const path = require('path');
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

const { resolveAml } = require('./resolve');
const { lensLines, isTestFile } = require('./lenses');
const { commandLine } = require('./terminal');

const selector = [{ scheme: 'file', language: 'starlark', pattern: '**/*.star' }, { scheme: 'untitled', language: 'starlark' }];

let client;
let output;

function amlPath() {
  return vscode.workspace.getConfiguration('aml').get('path', 'aml');
}

async function startClient(context) {
  const cwd = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders.length > 0
    ? vscode.workspace.workspaceFolders[0].uri.fsPath
    : undefined;
  const found = resolveAml(amlPath(), { cwd });
  if (found.error) {
    const choice = await vscode.window.showErrorMessage(found.error, 'Open Settings');
    if (choice === 'Open Settings') {
      vscode.commands.executeCommand('workbench.action.openSettings', 'aml.path');
    }
    return;
  }
  const server = { command: found.path, args: ['lsp'], transport: TransportKind.stdio, options: { cwd } };
  client = new LanguageClient('aml', 'AML', { run: server, debug: server }, {
    documentSelector: selector,
    outputChannel: output,
    traceOutputChannel: output,
  });
  try {
    await client.start();
  } catch (err) {
    vscode.window.showErrorMessage(`aml lsp (${found.path}) did not start: ${err.message || err}`);
    client = undefined;
  }
}

async function stopClient() {
  if (client) {
    const c = client;
    client = undefined;
    await c.stop();
  }
}

// runInTerminal runs aml with args for the active .star file (or uri) in
// a terminal named after it, in the file's directory.
async function runInTerminal(verb, uri) {
  const target = uri || (vscode.window.activeTextEditor && vscode.window.activeTextEditor.document.uri);
  if (!target || !target.fsPath.endsWith('.star')) {
    vscode.window.showWarningMessage('Open a .star workflow file first.');
    return;
  }
  const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.toString());
  if (doc && doc.isDirty) {
    await doc.save();
  }
  const found = resolveAml(amlPath());
  if (found.error) {
    vscode.window.showErrorMessage(found.error);
    return;
  }
  const name = `aml ${verb}: ${path.basename(target.fsPath)}`;
  const terminal = vscode.window.terminals.find((t) => t.name === name) ||
    vscode.window.createTerminal({ name, cwd: path.dirname(target.fsPath) });
  terminal.show(true);
  terminal.sendText(commandLine(found.path, [verb, target.fsPath]));
}

class Lenses {
  constructor() {
    this.changed = new vscode.EventEmitter();
    this.onDidChangeCodeLenses = this.changed.event;
  }

  provideCodeLenses(document) {
    if (!vscode.workspace.getConfiguration('aml').get('codeLens', true)) {
      return [];
    }
    const out = [];
    for (const line of lensLines(document.getText())) {
      const range = new vscode.Range(line, 0, line, 0);
      out.push(new vscode.CodeLens(range, { title: '$(play) Run workflow', command: 'aml.run', arguments: [document.uri] }));
      if (document.uri.scheme === 'file' && isTestFile(document.uri.fsPath, fs.existsSync)) {
        out.push(new vscode.CodeLens(range, { title: '$(beaker) Run tests', command: 'aml.test', arguments: [document.uri] }));
      }
    }
    return out;
  }
}

async function activate(context) {
  output = vscode.window.createOutputChannel('AML');
  const lenses = new Lenses();
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('aml.run', (uri) => runInTerminal('run', uri)),
    vscode.commands.registerCommand('aml.test', (uri) => runInTerminal('test', uri)),
    vscode.commands.registerCommand('aml.restartServer', async () => {
      await stopClient();
      await startClient(context);
    }),
    vscode.languages.registerCodeLensProvider(selector, lenses),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration('aml.path')) {
        await stopClient();
        await startClient(context);
      }
      if (e.affectsConfiguration('aml.codeLens')) {
        lenses.changed.fire();
      }
    }),
  );
  await startClient(context);
}

function deactivate() {
  return stopClient();
}

module.exports = { activate, deactivate };
