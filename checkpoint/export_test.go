package checkpoint

// AppendState is appendState, for the external test package's benchmarks.
var AppendState = appendState
