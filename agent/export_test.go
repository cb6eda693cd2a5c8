package agent

// Compact and Size expose the compaction algorithm to the external tests.
var (
	Compact = compact
	Size    = size
)
