package eval

// FullValidateForTest validates with the full JSON Schema validator only,
// bypassing the fast path.
func FullValidateForTest(s *Schema, v any) error { return s.resolved.Validate(v) }

// NormalizeTag exposes the tag normalization to the tests.
var NormalizeTag = normalizeTag

// ObserveLiveForTest makes every start of a fan-out helper report the
// number of goroutines of its evaluation doing evaluator work; nil stops.
func ObserveLiveForTest(f func(live int64)) { observeLive = f }
