// Package schema gives LLM agents structured output: it compiles the JSON
// Schema a job asks for, finds the JSON value in a model's free-text answer,
// validates it, and renders every problem found as a repair prompt for the
// next turn.
//
// # Flow
//
// A job's output schema is compiled once with [Compile]. Its
// [Schema.Instructions] go into the shared prompt prefix. When the model
// answers, [Schema.Parse] extracts the JSON value (see [Extract]) and
// validates it. On failure the returned [*ValidationError] lists every
// [Problem] with its JSON path, and [Feedback] turns it into the message sent
// back to the model for a retry.
//
// # Validation
//
// Validation is done by github.com/santhosh-tekuri/jsonschema/v6. Schemas use
// draft 2020-12 unless they name another draft in "$schema". Compilation never
// reads files or the network: only references inside the document ("#/$defs/x")
// and the bundled meta-schemas resolve. The "format" keyword is asserted (an
// answer with "format": "date-time" must hold a valid date-time), because an
// output contract that is not checked is of no use to a program; unknown
// formats are ignored.
//
// Numbers keep their exact text while validating, so integers of any size and
// decimals compare exactly.
//
// # Performance
//
// Validating a valid answer is on the hot path of every agent turn. For
// schemas made of the common keywords (type, properties, required,
// additionalProperties, items, enum, const, length, item-count and integer
// bounds), [Compile] also builds a checker that reads the document's bytes
// directly and allocates nothing; it can only accept. Anything it is not sure
// of, and every failure, goes through the full validator, which alone writes
// the problems.
//
// # Paths
//
// Problem paths start at "$" (the whole value) and name object members as
// ".name", or as ["odd key"] with a JSON string when the name is not a plain
// identifier, and array elements as "[index]": "$.items[0].name".
//
// # Concurrency
//
// A [*Schema] is immutable after [Compile] and safe for concurrent use. The
// package has no global mutable state.
package schema
