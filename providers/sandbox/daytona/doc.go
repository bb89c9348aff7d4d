// Package daytona is the client of Daytona's REST API (v0) that the
// remote sandbox provider (providers/sandbox/remote) uses: Service
// implements remote.Service, and the sandboxes it creates implement
// remote.Machine. It is written by hand against the two OpenAPI documents
// Daytona publishes (the control plane at https://app.daytona.io/api, and
// the toolbox each sandbox serves at its toolboxProxyUrl); no Daytona Go
// module is used. internal/daytonadouble serves the same documents
// locally, validating every request and response, for the tests.
//
// # The control plane
//
// Create sends POST /sandbox with the labels, a name of its own
// ("aml-<uuid>", unless Options.Create gives one), the target, the fields
// of Options.Create, and either the snapshot or, for an image, buildInfo
// with the one-line Dockerfile "FROM <image>" (the API has no image
// field). It then polls GET /sandbox/{id} until the state is started; the
// states build_failed and error fail with the service's errorReason
// (ErrBuildFailed), and CreateTimeout bounds the whole. A sandbox that
// fails, or whose creation is cancelled, is destroyed before Create
// returns: the create request itself is let finish when ctx is cancelled
// (within RequestTimeout), so that a sandbox the service made is known,
// and when its answer is lost the sandbox is destroyed by its name.
// List sends GET /sandbox?labels=<JSON object> and follows nextCursor;
// Destroy sends DELETE /sandbox/{id}, and a 404 is success.
//
// # Processes
//
// A process is the one command of a session of its own (POST
// /process/session, POST /process/session/{id}/exec with runAsync and
// suppressInputEcho), never /process/execute, which takes a shell string
// and merges stderr into stdout. The session API takes a shell text too,
// so the literal argv is quoted: each argument single-quoted, each single
// quote in it closing the quote, escaped and reopening it (quote), so that
// quotes, $(...), backquotes, newlines and spaces reach the process as
// given; the script enters the directory
// (relative directories are relative to the user's home, which GET
// /user-home-dir names), exports the environment and execs the argv (see
// script).
//
// The output is followed over a WebSocket (GET
// .../command/{cmdId}/logs?follow=true, with X-Daytona-Split-Output:
// true so that the streams stay apart): the daemon writes each line of
// stdout and stderr to one log, labelled 0x01 0x01 0x01 or 0x02 0x02
// 0x02, and the client splits it again. Because the daemon reads output
// line by line, a process's output reaches the reader a line at a time,
// NUL bytes are lost, and a last line without a newline would gain one:
// the script ends each stream with a mark line of its own, so the exact
// end of the output is known and no newline is added. A stream that
// breaks is reopened and what was already read is skipped; when the
// sandbox is gone (destroyed from outside) the streams and Wait fail
// with ErrSandboxGone. Wait reads the exit code (GET
// .../command/{cmdId}) once the log ends, and deletes the session.
//
// Standard input goes through POST .../command/{cmdId}/input, whose data
// is a JSON string that the daemon writes to the command's input with a
// newline added when it lacks one, and whose input is never closed while
// the command runs. So the client sends each write as a line of base64,
// and Close sends a line "."; the script decodes the lines into a FIFO the
// process reads, which ends at ".". This needs mktemp, mkfifo and base64
// in the image, as the daemon itself needs mkfifo. A process started
// without Stdin reads /dev/null.
//
// Kill deletes the session, which kills its process group; Wait then
// reports 137. When the session cannot be deleted, Kill destroys the
// sandbox, since the process would run on. Command.Timeout is enforced by
// the client with Kill (the session API has no timeout).
//
// # Files
//
// Upload streams the content as the multipart part "file" of POST
// /files/upload?path=, and Download streams GET /files/download?path=;
// neither holds a file in memory. Relative paths are relative to the
// user's home.
//
// # Requests
//
// Every request carries Authorization: Bearer <key> (and
// X-Daytona-Organization-ID when an organization is given) and has a
// deadline: RequestTimeout until its answer, IdleTimeout without progress
// for uploads, downloads and output streams (which may rightly last
// long). A 429 Too Many Requests is retried after the Retry-After the
// service asks for, at most MaxRetries times and MaxRetryWait at a time;
// idempotent requests are also retried after network failures and 502,
// 503 and 504. Errors name the operation and the cause (*APIError:
// refused credentials, a snapshot not found, rate limiting), and never
// hold the API key.
package daytona
