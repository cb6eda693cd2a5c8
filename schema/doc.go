// Package schema gives LLM agents structured output: it compiles the JSON
// Schema a job asks for, finds the JSON value in a model's free-text answer,
// validates it, and renders every problem found as a repair prompt for the
// next turn.
//
// # Flow
//
// A job's output schema is compiled once with [Compile], from a JSON Schema
// document or from a Go type with [For]. Its [Schema.Instructions] go into
// the shared prompt prefix. When the model answers, [Schema.Parse] extracts
// the JSON value (see [Extract]), repairs it if it is broken in a way that
// has one reading (see [Repair]), and validates it. On failure the returned
// [*ValidationError] lists every [Problem] with its JSON path, and [Feedback]
// turns it into the message sent back to the model for a retry. A
// [CheckFunc] adds the rules a schema cannot express; [CheckError] turns its
// error into a ValidationError for the same feedback.
//
// # Typed output
//
// [For] derives the schema from a Go type with github.com/google/jsonschema-go:
// structs become closed objects, fields without omitempty are required, and
// `jsonschema:"..."` tags become descriptions. The output of [Schema.Parse]
// then unmarshals into that type.
//
// # Repair
//
// A retry costs a model call, so [Schema.Parse] first repairs what can be
// repaired without guessing: a Markdown fence or prose around the value,
// trailing commas, and the brackets left open by a truncated answer when the
// cut falls after a complete value. It never invents, drops or changes a
// value: a cut inside a string, after a member name or inside a number,
// single quotes and the like are left for the model to fix.
// [Schema.ParseRepaired] also says which repairs were made.
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
// Validating a valid answer is on the hot path of every agent turn. An
// answer that is valid JSON as a whole costs one json.Valid pass and the
// validation. One in a fence or in prose also gets a linear scan for a
// broken value around the one found. Repair proper runs only on broken
// values; its cost grows with their size (about 12 ms for a truncated 10 KB
// answer).
//
// A simple schema is validated faster. When a schema uses only "type",
// "properties", "required", "additionalProperties", "items", scalar "enum"
// and "const", the length, count and numeric bounds, "pattern" and
// annotations (and names draft 2020-12, 2019-09, 7 or 6, if any), [Compile]
// also builds a validator that checks the JSON text in one pass, without
// decoding it into Go values, and writes the compact output as it goes. It
// can only accept: a value it does not accept (an invalid one, or one with
// duplicate member names, text that is not UTF-8 or a number with an
// exponent of five digits or more) is validated by the library as any
// other, so results and problems are the same either way. For a small
// object this makes validation about twenty times faster, and it allocates
// nothing but the output.
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
