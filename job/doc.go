// Package job holds what a batch job is and what comes out of it: the
// vocabulary every other package shares, with no I/O and no engine code
// (it imports neither sched nor an internal package).
//
// # What to run
//
// A [Def] describes a job: its model, system prompt, task template, tools,
// output JSON Schema, the limits of each agent (turns, retries, tokens,
// timeout, outage budget), its priority class ([Batch] or [Interactive]),
// packing ([Pack]) and its fallback tiers ([Fallback]: further models,
// then a Go function, within a time budget). [NewSpec] validates it, fills
// its defaults and compiles it once into an immutable [Spec]; an invalid
// Def gives an error wrapping [ErrBadSpec] that names the field.
//
// # Templates and inputs
//
// [ParseTemplate] parses text with {field} placeholders into an immutable
// [Template]. {user.name} reaches into nested objects and {tags.0} into
// arrays; "{{" and "}}" are literal braces. [Template.Render] fills the
// placeholders from an [Input] (one row: field name → value): strings go
// in as they are, numbers as decimal text, objects and arrays as compact
// JSON. A missing field is a *[MissingFieldError], so a bad row fails
// alone. [Template.MissingFields] compares a template's fields with what
// an input source provides, so that a misspelt placeholder is found
// before any row is rendered. Package input reads rows from slices, JSON
// Lines and CSV; a row it cannot decode is an [InputError].
//
// # What comes out
//
// Every input yields exactly one [Result]: the validated output, or an
// [*AgentError] with a [Kind] (backend, rate_limit, timeout, tool,
// validation, ...), the failed step and turn, and a cause that answers
// errors.Is for the sentinel classes ([ErrBackendUnavailable],
// [ErrMaxTurns], [ErrPanic], ...). A Result carries its counters, token
// usage, [Timings] and model turns ([Span]); it encodes as one JSON line
// ([Result.MarshalJSON], byte for byte the same as [Result.AppendJSON]),
// and [Decode] turns its output into a Go value.
package job
