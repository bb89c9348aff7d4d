package persist

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Revision formats.
const (
	// FormatArchive stores a revision as one tar.gz object.
	FormatArchive = "archive"
	// FormatFolder stores a revision as a manifest plus one object per
	// file.
	FormatFolder = "folder"
)

// Default limits.
const (
	DefaultMaxArchiveBytes   int64 = 256 << 20
	DefaultMaxEntries              = 1000000
	DefaultMaxExtractedBytes int64 = 1 << 30
)

// Fixed limits of the control objects.
const (
	// MaxIndexBytes bounds workspace.json.
	MaxIndexBytes = 4 << 20
	// MaxManifestBytes bounds a folder revision's manifest.json: enough
	// for millions of entries (MaxEntries bounds them).
	MaxManifestBytes = 1 << 30
)

// StoreOptions are the options of a revision store that its providers
// share with their users: the format of new revisions, the bounds of a
// revision and where revisions are materialized. Options embeds them, as
// do the options of the providers built on New (filesystem.Options,
// s3.Options), so that each of them is declared, documented, validated
// and defaulted here only. Zero fields take their defaults.
type StoreOptions struct {
	// Format of new revisions: FormatArchive (default) or FormatFolder.
	// Existing revisions are restored in their recorded format.
	Format string
	// MaxArchiveBytes bounds a compressed archive on save and restore;
	// default DefaultMaxArchiveBytes.
	MaxArchiveBytes int64
	// MaxEntries bounds the entries of a snapshot, archive or manifest,
	// counting an archive's root entry; default DefaultMaxEntries.
	MaxEntries int
	// MaxExtractedBytes bounds the file bytes of a snapshot, archive or
	// manifest; default DefaultMaxExtractedBytes.
	MaxExtractedBytes int64
	// TemporaryDirectory is the parent of materializations (resolved to
	// an absolute path by New); default os.TempDir(). Keep the durable
	// store outside it.
	TemporaryDirectory string
}

// Options configure New. Zero fields take their defaults. New copies them;
// only Hooks.Step is called later (see Hooks).
type Options struct {
	// StoreOptions are the format, bounds and temporary directory;
	// Validate reports what is invalid in them.
	StoreOptions
	// TemporaryAge is how old a temporary upload that a killed writer left
	// in the store must be before an acquisition with the writer lock
	// removes it; default DefaultTemporaryAge. (A temporary upload carries
	// no owner, so its age is what tells it from one in progress.)
	TemporaryAge time.Duration
	// Hooks inject failures for tests; the zero value injects none.
	Hooks Hooks
}

// DefaultTemporaryAge is the default of Options.TemporaryAge.
const DefaultTemporaryAge = 10 * time.Minute

// Step names a point of the save protocol where Hooks.Step is called.
type Step string

// Steps of a save, in order.
const (
	// StepAfterSnapshot follows the local snapshot, before any upload.
	StepAfterSnapshot Step = "after-snapshot"
	// StepArtifactObject follows each object written for the new
	// revision (each folder file, the manifest, the archive).
	StepArtifactObject Step = "artifact-object"
	// StepAfterArtifactUpload follows the complete artifact upload.
	StepAfterArtifactUpload Step = "after-artifact-upload"
	// StepBeforePublication precedes the conditional write of
	// workspace.json, after the new index was built and validated.
	StepBeforePublication Step = "before-publication"
	// StepAfterPublication follows a successful publication, before
	// pruning.
	StepAfterPublication Step = "after-publication"
	// StepDuringPrune precedes the deletion of each pruned revision.
	StepDuringPrune Step = "during-prune"
)

// Steps lists every Step in protocol order.
var Steps = []Step{StepAfterSnapshot, StepArtifactObject, StepAfterArtifactUpload, StepBeforePublication, StepAfterPublication, StepDuringPrune}

// Hooks inject failures into saves (tests prove crash safety with them).
type Hooks struct {
	// Step, when non-nil, is called at each Step of a save (concurrently
	// for StepArtifactObject, so it must be safe for concurrent use). A
	// non-nil error fails the save there as an ordinary failure (orphans
	// are cleaned up, a failure after publication is a *PruneError), or,
	// when it wraps ErrSimulatedCrash, stops the save at once without any
	// storage cleanup, as a killed process would.
	Step func(step Step) error
}

// Validate reports invalid options: an unknown format or a negative
// bound. It is pure and safe for concurrent use.
func (o StoreOptions) Validate() error {
	switch o.Format {
	case "", FormatArchive, FormatFolder:
	default:
		return fmt.Errorf("workspace persistence: format %q must be %q or %q", o.Format, FormatArchive, FormatFolder)
	}
	if o.MaxArchiveBytes < 0 || o.MaxEntries < 0 || o.MaxExtractedBytes < 0 {
		return fmt.Errorf("workspace persistence: limits must be positive")
	}
	return nil
}

// normalized returns the options with defaults applied and the temporary
// directory made absolute.
func (o StoreOptions) normalized() (StoreOptions, error) {
	if err := o.Validate(); err != nil {
		return o, err
	}
	if o.Format == "" {
		o.Format = FormatArchive
	}
	if o.MaxArchiveBytes == 0 {
		o.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxExtractedBytes == 0 {
		o.MaxExtractedBytes = DefaultMaxExtractedBytes
	}
	if o.TemporaryDirectory == "" {
		o.TemporaryDirectory = os.TempDir()
	}
	abs, err := filepath.Abs(o.TemporaryDirectory)
	if err != nil {
		return o, fmt.Errorf("workspace persistence: temporary directory: %w", err)
	}
	o.TemporaryDirectory = abs
	return o, nil
}

// normalized returns the options with defaults applied.
func (o Options) normalized() (Options, error) {
	store, err := o.StoreOptions.normalized()
	if err != nil {
		return o, err
	}
	o.StoreOptions = store
	if o.TemporaryAge == 0 {
		o.TemporaryAge = DefaultTemporaryAge
	}
	return o, nil
}
