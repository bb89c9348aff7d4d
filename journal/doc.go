// Package journal is the file backend of durable runs: it implements
// eval.Journal on an append-only, checksummed file per run, and keeps
// each run's metadata and states so that runs can be listed, resumed and
// pruned.
//
// # Layout
//
// A journal directory holds one directory per run, named by the run's id
// (eval.NewRunID, a version 7 UUID, so names sort by start time):
//
//	DIR/                  created 0700 when missing
//	  <run id>/           0700
//	    journal.log       0600, the records; flock(2)ed by the process that holds the run
//	    objects/          0700, workspace checkpoints' file contents (see Checkpoints)
//	      <sha256 hex>    0600
//	    checkpoints/      0700, their manifests
//	      <id>.json       0600
//
// An existing DIR is used as it is; its permissions are not changed.
// objects/ and checkpoints/ are made by the run's first Checkpoint.
//
// A journal.log is a regular file in its run's directory. One that is
// not (a named pipe, a device, a socket, a directory, or a symbolic link
// to anything) is refused before anything reads it, with an error that
// names it and wraps ErrNotRegular: it is opened without blocking and
// without following a link (O_NONBLOCK, O_NOFOLLOW) and fstatted first,
// so that a planted FIFO cannot make a command wait forever, nor a link
// to /dev/zero make it read without end. Open and ReadEffects fail; List
// lists such a run with only its id and the error (Summary.ReadErr);
// Prune keeps it and reports it in its error.
//
// # Records
//
// journal.log is a sequence of lines, one record per line:
//
//	<crc> <payload>\n
//
// crc is the CRC-32C (Castagnoli) of the payload bytes as 8 lowercase hex
// digits; payload is a JSON object on one line (JSON strings escape
// newlines, and the writer refuses a payload with a raw newline). Its "t" field names the record type:
//
//	{"t":"meta","v":2,"workflow":"review.star","digest":"<sha256 hex>","entry":"main","options":{...},"started":"<RFC 3339>"}
//	{"t":"state","at":<unix ms>,"state":"running","owner":"aml-<pid>-<machine>-<uuid>"}
//	{"t":"effect","at":<unix ms>,"e":<eval.Effect JSON>}
//	{"t":"state","at":<unix ms>,"state":"suspended","questions":[<eval.Question JSON>...]}
//	{"t":"state","at":<unix ms>,"state":"failed","error":"..."}
//	{"t":"state","at":<unix ms>,"state":"succeeded","result":"..."}
//
// The first record is the run's metadata (Meta; "v" is the format
// version, 2) and the second the first state, running. After them come
// effect and state records in the order they were appended. A later
// effect record under an id supersedes an earlier one (an effect of
// kind "void", eval.VoidKind, withdraws it); the last state record is
// the run's state. A running state names, as "owner", the owner marker
// of the process that ran or resumed the run (Run.Owners), so that a
// resume can end what a killed one left running; a succeeded state
// holds the run's result, so that a run killed between finishing and
// printing loses nothing (aml runs show prints it).
//
// Version 1 keyed effects by their source positions; this version opens
// and lists such runs but refuses to resume them (ErrFormat): their
// identities cannot be matched.
//
// An effect's "e" is what eval.Effect.MarshalJSON encodes, with these
// savings: when the effect's kind can be read back from its id (eval
// builds ids as path/kind#n, or path/kind:what#n for a check), "kind" is
// left out; a label that is the kind's default ("agent()" for an agent)
// is left out; and an effect record appended in the same millisecond as
// the record before it has no "at" ({"t":"effect","e":...}). They are
// restored when the record is read. The position ("file", "line", "col",
// the file relative to the workflow's directory) and the order ("o")
// are always written. A result is kept byte for byte as the evaluator
// encoded it (compact JSON). A typical agent effect takes under 300
// bytes besides its result (see BenchmarkEffectSize).
//
// # Guarantees
//
// A Run gives what eval.Journal asks of a backend:
//   - Lookup returns the last record under an id, including the records
//     this process appended, and is safe for concurrent use;
//   - Record is safe for concurrent use and keeps records whole: after a
//     crash each record is entirely present or absent. A torn last line
//     (one with no newline, or whose checksum or JSON is bad) is ignored
//     when the run is opened (Run.Torn reports it) and truncated away
//     before the next append. A bad line that is not the last is not a
//     crash's doing: Open fails with ErrCorrupt naming the file and line;
//   - after Sync returns nil, every record appended before the call is
//     on stable storage (the file was fsynced; the first fsync of a new
//     run also fsyncs the directories Create made), so it survives a crash of the process and
//     of the machine;
//   - one run is held by at most one Run at a time, across processes:
//     Create and Open take an exclusive flock on the run's journal.log and
//     keep it until Close (or until the process dies, when the kernel
//     releases it). Open fails with ErrLocked while another holds it.
//
// # Checkpoints
//
// A Run implements eval.Checkpointer: the evaluator checkpoints a
// workspace's directory after each live effect inside it and names the
// checkpoint in the effect's record (the effect's "cp"), and a resumed
// run restores them. A checkpoint is a manifest, checkpoints/<id>.json,
// whose files' contents are objects: objects/<sha256 hex> holds the
// content whose SHA-256 it is named by, shared by all the run's
// checkpoints and written once. A manifest is one JSON object:
//
//	{"v":1,"entries":[
//	  {"path":"src","dir":true,"mode":493,"mtime":1767225600000000000},
//	  {"path":"src/main.go","mode":420,"size":1234,"mtime":1767225600000000000,"sha256":"<hex>"},
//	  ...]}
//
// "v" is the manifest format version, 1. An entry's "path" is slash-
// separated and relative to the checkpointed directory (which has no
// entry), and a directory's entry comes before its contents'; "mode" is
// the permission bits (the 0777 part, as a number) and "mtime" the
// modification time in Unix nanoseconds; a file has its "size" and the
// SHA-256 of its content, a directory "dir" set. A checkpoint holds
// regular files and directories only: Checkpoint refuses a tree with a
// symbolic link or a special file, or with a name that is not valid
// UTF-8 (which JSON cannot hold), naming it.
//
// An id is the checkpoint's number as 8 decimal digits (00000001, ...),
// so ids sort in the order the checkpoints were taken; a Run numbers its
// checkpoints after the highest one in checkpoints/ or named by a record,
// so the order holds across processes resuming the run.
//
// Durability: objects and manifests are written to temporary names
// (".tmp-" and a random suffix), fsynced and renamed into place; objects/
// is fsynced after new objects were renamed into it and before the
// manifest is written, and checkpoints/ after the manifest was renamed
// (the run's directory too, when the first Checkpoint made objects/ and
// checkpoints/). Checkpoint returns once all of that is done, so a
// checkpoint is durable before a record can name it and Sync has nothing
// more to do for it. A crash leaves every checkpoint whole or absent,
// and at worst temporary files and unused objects: the next Checkpoint
// of the run ignores them and removes the temporary files.
//
// Efficiency: a Run keeps, per checkpointed directory, the size,
// modification time, inode number and change time of every file with its
// content hash, and does not read a file again whose stat is unchanged
// (a file modified less than 2 s before it was seen is read again the
// next time, in case a write within the file system's timestamp
// granularity left its stat as it was); an object that exists is not
// written again. Restore writes only the files whose size or content
// differ (to a temporary name, ".aml-restore-" and a random suffix, in
// the same directory, renamed over the old file), and sets the modes
// and modification times of the others when they differ.
//
// Recording Succeeded (SetState) removes objects/ and checkpoints/: a
// finished run is not resumed, and Prune removes the whole run later
// anyway.
//
// # Content
//
// The journal holds content: agents' results (their text or structured
// values and turns), scripts' output, tool output and answers to
// questions, because a resumed run serves them instead of running the
// effects again; and copies of its workspaces' files (the checkpoints),
// because a resumed run restores them. The content-capture rules of traces (which keep prompts
// and results out of trace files unless asked to) do not apply to it;
// only the requests are reduced to fingerprints. Journal directories are
// therefore private to their owner (0700 directories, 0600 files), and
// should be treated like the agents' output itself: pruned (Prune) or
// removed when no longer needed, not shared.
//
// # Keys
//
// The values a run reads from its environment (env()) are recorded as
// digests, so that a resume notices a changed value without the journal
// holding it. A plain hash of a short value is reversed by trying every
// value, so the digests are keyed (HMAC-SHA256) with a key that is kept
// outside the journal directory: LoadKey reads it, and makes it on first
// use, at KeyPath (aml/journal.key in os.UserConfigDir, or the file
// $AML_JOURNAL_KEY_FILE names), 32 random bytes in a 0600 file. A run
// records the key's id (KeyID, never the key) with its options; a
// journal copied to a machine without that key can still be resumed,
// but its env() values cannot be checked there. This package only keeps
// the key; the digests are made where the values are read
// (starlib.LoadOptions.EnvDigestKey).
package journal
