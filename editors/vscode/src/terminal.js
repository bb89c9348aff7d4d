'use strict';
// The command lines the Run commands send to a terminal. Pure, so the
// tests run it under plain Node.

// quote quotes one argument for the shell of the platform: POSIX single
// quotes, or PowerShell's on Windows (the default terminal there).
function quote(arg, platform = process.platform) {
  if (platform === 'win32') {
    return /^[A-Za-z0-9_\-.\\/:]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "''")}'`;
  }
  return /^[A-Za-z0-9_\-.\/:=@%+,]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

// commandLine is the text typed into the terminal to run aml with args.
// On Windows a quoted executable needs PowerShell's call operator.
function commandLine(aml, args, platform = process.platform) {
  const parts = [aml, ...args].map((a) => quote(a, platform));
  const line = parts.join(' ');
  return platform === 'win32' && parts[0].startsWith("'") ? `& ${line}` : line;
}

module.exports = { quote, commandLine };
