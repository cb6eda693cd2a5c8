// Package livetest holds the live tests: the backend conformance subset and
// the engine run against a real inference server rather than a fixture or
// the simulator. The tests run only when BATCHAGENT_LIVE_URL names an
// OpenAI-compatible server (BATCHAGENT_LIVE_MODEL its model,
// BATCHAGENT_LIVE_PARALLEL its parallel sequences, BATCHAGENT_LIVE_NUM_CTX
// each sequence's context); scripts/ollama serves one and sets them:
//
//	scripts/ollama run -- go test -race -count=1 -run Live ./internal/livetest
//
// The package has no code of its own besides this comment.
package livetest
