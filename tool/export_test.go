package tool

// Exported for tests and benchmarks in package tool_test.
var (
	CanonicalArgs      = canonicalArgs
	ReferenceCanonical = referenceCanonical
	AppendCanonical    = appendCanonical
)
