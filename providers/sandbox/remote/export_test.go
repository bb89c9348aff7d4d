package remote

// The transfer's steps, for the tests of package remote_test.
var (
	WriteTree = writeTree
	Extract   = extract
	Mirror    = mirror
)
