package eval

// FullValidateForTest validates with the full JSON Schema validator only,
// bypassing the fast path.
func FullValidateForTest(s *Schema, v any) error { return s.resolved.Validate(v) }

// NormalizeTag exposes the tag normalization to the tests.
var NormalizeTag = normalizeTag
