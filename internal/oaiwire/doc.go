// Package oaiwire holds the OpenAI chat-completions wire format, written
// once for the three places that speak it: the gateway (server), the
// simulator's HTTP server (backend/sim/simhttp) and the OpenAI backend
// (backend/openai).
//
//   - The request: [Request] and its parts, as a server decodes them, with
//     the conversion to llm's vocabulary ([Request.LLMMessages],
//     [Request.LLMTools], [Message.Text]); and [AppendRequest], the
//     backend's encoder of an [llm.Request], written by hand rather than
//     by reflection for its speed.
//   - The answer: [Completion], [Chunk] (one event of a stream) and
//     [Usage], as a server writes them; [ClientChunk], the part of a chunk
//     a client reads.
//   - Errors: [ErrorBody], OpenAI's error object, and [ParseError], which
//     reads the error bodies of every OpenAI-compatible server.
//
// The conformance tests hold each type equal to the official SDK's
// (github.com/openai/openai-go): the fields it declares carry the names
// and JSON types the SDK's do. The package imports only the standard
// library, llm and internal/jsonenc.
package oaiwire
