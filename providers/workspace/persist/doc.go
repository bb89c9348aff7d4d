// Package persist is the revision-backed workspace helper: New turns a small
// Storage adapter (object reads, conditional writes, listing, deletion and
// writer authority over one namespace per workspace id) into an
// eval.WorkspaceProvider that owns materialization, snapshots, revision
// formats, the index, conditional publication and retention.
//
// # Layout
//
// Inside a workspace's namespace (see EncodeSegment for the adapters'
// id-to-segment mapping):
//
//	workspace.json                 the index: {version:2, current, revisions:[{id, format, path, createdAt, sha256, size}]}
//	revisions/<id>.tar.gz          an archive revision
//	revisions/<id>/manifest.json   a folder revision's manifest: {version:1, entries:[{path | pathBytes, type, size, mode, mtime?, sha256?}]}
//	revisions/<id>/files/<path>    a folder revision's file contents
//	revisions/<id>/raw/<sha256>    the contents of a file whose path cannot be a key (see below)
//	pending/<id>.json              a save in progress: {revision, owner:{pid, host, machine}, createdAt}
//
// The index lists retained revisions newest first, at most the save's
// retention; current is one of them. It is at most MaxIndexBytes and is
// validated strictly (ParseIndex). Each revision is pinned: sha256 and
// size are those of its archive, or of its folder manifest (whose
// entries pin each file), and a load refuses content that does not match
// them, naming the object (a swapped, truncated or damaged revision).
// Version 1 indexes, which had no pins, are read; their revisions stay
// unpinned until retention drops them. Revision ids are random UUIDs. Archives
// are gzip-compressed tar files with a root entry "./" followed by
// "./<path>" entries (directories and regular files only). Manifests are at
// most MaxManifestBytes.
//
// # Materialization
//
// Acquire takes the storage lease (and its lock) first, then creates
// <TemporaryDirectory>/aml-workspace-*/workspace and restores the selected
// revision in its recorded format: Load nil gives an empty directory, as
// does "current" while no index exists and no published revision is
// stored; a named revision must be listed. The index is read even with
// Load nil. A missing index while published revisions are stored (ones
// no pending marker announces), or an index that does not parse, is an
// *IndexError naming where the index is, what is stored and the fix
// (aml workspace check and recover): nothing is loaded, and nothing is
// deleted.
// With Load.Include or Load.Exclude the revision is restored into a
// sibling "restored" directory and the selection is moved into
// "workspace". Restores validate everything they read: entry types (only
// directories and regular files), paths, duplicates, entry and byte limits,
// archive size, folder object sizes and hashes. Invalid or missing stored
// state is a *CorruptError (errors.Is ErrCorrupt), never a
// *eval.WorkspaceConflictError and never a silent empty start.
//
// # Snapshots and selection
//
// Save walks the materialization without following symlinks, dotfiles
// included. A path is selected when neither it nor an ancestor directory
// matches an exclude glob and, when Include is non-nil, it or an ancestor
// matches an include glob (so "src" selects the subtree, as does "src/**");
// a directory is also kept when it holds a selected entry. Globs are
// doublestar patterns (ValidatePatterns). With Gitignore and a nil Include,
// the tree's .gitignore files apply with git semantics (nested files,
// negation, directory-only patterns; an ignored directory hides its
// subtree). Selected symlinks and special files fail the save, as do
// unsafe names (see the path rules below). Permission bits (0777) and
// modification times are kept. Entries are ordered by depth, then by path.
// Limits count entries (plus the archive root entry for archives) and file
// bytes. The selection is first fixed in <root>/snapshot-<revision> (files
// hard-linked where possible, else copied), so renames and deletions in the
// materialization during the save do not affect it; a file modified in
// place during the save fails it ("changed during the save") when its size,
// or for the folder format its hash, no longer matches the snapshot.
//
// Paths of snapshots, archives and manifests must be non-empty, relative,
// without NUL, and without empty, "." or ".." segments; on Windows they
// also have no backslash and no drive letter. Every other name the
// platform allows is saved and restored: "a:b.txt", `a\b` and bytes that
// are not UTF-8 on Linux. A manifest keeps a path that is not valid UTF-8
// in pathBytes (standard base64), and a folder revision stores a file
// whose path is not valid UTF-8, holds a control character or a backslash, or would make
// a key longer than 768 bytes under raw/<the hex SHA-256 of the path>
// instead of files/<path>. Manifests hold at least a million entries
// (MaxManifestBytes is 1 GiB; MaxEntries bounds the entries).
//
// # Publication
//
// A save uploads a new immutable artifact with create-if-absent writes
// (the folder manifest last), builds the next index (the new revision
// first, truncated to the retention), and publishes it with one conditional
// write of workspace.json: Absent when the lease observed no index, else
// MatchVersion of the observed version. That write is the only publication
// point: a save that fails or crashes before it leaves the previous index
// and revision untouched, and a stale writer's save (lock=false, or a lost
// lock) fails with an error wrapping ErrPreconditionFailed. A failed
// publication deletes the unpublished artifact (unless the index shows it
// became current). After publication the lease adopts the new index and
// version, so saves chain, and revisions beyond the retention are deleted;
// a deletion failure leaves a valid index plus orphaned artifacts and is
// reported as a *PruneError.
//
// # Crash garbage
//
// A save writes pending/<id>.json before the first object of its revision
// and deletes it after publication. Every materialization root holds
// owner.json (the process, the storage, the workspace id). Acquire removes
// the materializations of the same workspace whose owner is a process of
// this machine that no longer exists; with the writer lock it also removes
// the revisions that no index entry and no live pending marker names (a
// save or a prune that was killed), stale markers, and the adapter's
// temporary uploads older than Options.TemporaryAge (TempSweeper). The
// Sweeper interface does the same on demand, for one workspace or for all
// of a storage that implements Lister (aml workspace prune). Nothing is
// deleted on a guess: only a successfully read, valid index proves a
// revision unreferenced, so without one no revision and no marker is
// removed.
//
// # Checking and recovering
//
// Check verifies a store as restic's check does (the index, every
// revision it names, their pins, every folder file's size, and with
// ReadData every object's digest); Recover rebuilds a lost or damaged
// index from the sound published revisions stored, newest (by the
// store's modification times) current. The optional Locator (Storage)
// and InfoLister (StorageLease) capabilities let both, and the errors,
// name objects and read sizes and times from one listing.
//
// # Folder reuse
//
// Folder revisions are self-contained (each has all its files), which keeps
// pruning a plain deletion of one prefix. A folder save reuses unchanged
// content without rewriting it: the manifest records each file's sha256,
// and when the storage lease implements Copier, a file whose hash appears
// in the revision the lease restored or last published (or, failing that,
// the current folder revision) is copied inside the store (a hard link for
// the filesystem adapter) instead of uploaded. A copy whose source was
// pruned meanwhile falls back to an upload.
//
// # Concurrency
//
// Providers are safe for concurrent use. A lease's methods are safe for
// concurrent use: saves are serialized, and Release waits for a running
// save. Storage implementations must be safe for concurrent use; folder
// transfers run up to eight objects at once.
package persist
