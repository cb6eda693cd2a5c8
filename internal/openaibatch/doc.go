// Package openaibatch runs a file in OpenAI's batch input format (a
// custom_id, method, url and body per line) through an OpenAI-compatible
// Batch API served in-process by an http.Handler (the gateway's), with no
// listener: it uploads the file and creates the batch, or finds the batch
// of the same file in the API's store to resume it, polls it until it
// ends, and writes every line's result to one file in input order.
//
// `batchagent run --openai-batch` opens the store and the backends, calls
// Run and prints; Scan reads the file's digest and models beforehand.
package openaibatch
