package temporal

import "github.com/aml-go/aml/temporal/wire"

// The values the workflows exchange with their clients live in package
// wire, which the aml command reads without linking a Temporal client;
// these are their names in this package.
type (
	// Bundle is wire.Bundle: a workflow file and its modules, packed.
	Bundle = wire.Bundle
	// File is wire.File, one file of a Bundle.
	File = wire.File
	// PackError is wire.PackError.
	PackError = wire.PackError
	// ProviderError is wire.ProviderError.
	ProviderError = wire.ProviderError
	// StartOptions is wire.StartOptions, what Client.Start takes.
	StartOptions = wire.StartOptions
	// RunError is wire.RunError, how a run failed.
	RunError = wire.RunError
	// Cancelled is wire.Cancelled, how Client.Cancel ended a run.
	Cancelled = wire.Cancelled
	// PrintPage is wire.PrintPage, a page of a run's print() lines.
	PrintPage = wire.PrintPage
	// TracePage is wire.TracePage, a page of a run's trace events.
	TracePage = wire.TracePage
	// TraceEvent is wire.TraceEvent.
	TraceEvent = wire.TraceEvent
	// Answer is wire.Answer, the payload of AnswerSignal.
	Answer = wire.Answer
	// RunState is wire.RunState, what StateQuery returns.
	RunState = wire.RunState
	// RunResult is wire.RunResult, a finished run's result.
	RunResult = wire.RunResult
)

// MaxBundleBytes is wire.MaxBundleBytes.
const MaxBundleBytes = wire.MaxBundleBytes

// ErrAlreadyEnded is wire.ErrAlreadyEnded, the error of Cancel for a run
// that had ended before it could be cancelled.
var ErrAlreadyEnded = wire.ErrAlreadyEnded

// Pack is wire.Pack: it packs the workflow file entry and the modules it
// loads.
func Pack(entry string) (*Bundle, error) { return wire.Pack(entry) }
