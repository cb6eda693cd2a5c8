// Package sim is a deterministic simulator of an agentic LLM behind an
// inference server, for tests, examples and benchmarks where no GPU is
// present. It is not a mock of batchagent's types: it is an [llm.Model] (and
// [llm.Streamer]) that drives any job without scripting.
//
// # Behaviour
//
// On the first [Config.ToolTurns] turns of a conversation the simulated
// model calls the request's tools (all of them, or those named in
// [Config.Tools]) with arguments generated from each tool's parameter
// schema, the way a real model copies a path or an ID from its task: an
// argument takes the value of a field of the agent's input
// ([llm.Request.Input], the row its task was rendered from) or of its task
// text ("name: value", "name=value", a quoted value whole, the members of
// a JSON object written in the task) when the parameter's name matches the
// field's — the same name, in any case, or the same words in another
// spelling (file_path, filePath, file-path) — or, failing that, when the
// parameter's description mentions the field: read_file's path, "the file
// to read", takes the input's file. Among equal matches the input's fields
// come first (in key order), then the task's (in the order written), and
// for descriptions the earliest mention; a value is taken only when it
// fits the parameter's type and enum (an integer parameter takes 7 or
// "7"). Otherwise enum, const, default and examples are honoured, and
// anything else is generated.
//
// A task (the first user message) that contains "sim_tool_turns=N"
// ([TaskToolTurns]) gets N tool turns instead, so one simulator can script
// agents of different lengths.
//
// After that it answers. With an output schema ([llm.Request.Output]) the
// answer is a JSON value generated from the schema, deterministic for a
// given seed and task text, so reruns produce identical outputs. A share of
// answers ([Config.InvalidRate]) violate the schema, to exercise the
// caller's validation and retry path.
//
// # Packed prompts
//
// A request whose output schema is named pack.SchemaName (see package
// internal/pack) carries several tasks at once, and its final answer is one
// JSON object with a member per id of the schema's "required" array, in
// that order, each generated from the id's property schema. Each entry is
// seeded by its task's text (from the tasks of the user message) the way
// that task's answer would be alone, so an entry equals the answer the
// task gets in a request of its own with the same system prompt; a pack
// whose system message ends with the text-answer instructions gets text
// answers, as JSON strings. [Config.InvalidRate] applies to each entry.
//
// A share of entries ([Config.CorruptRate]) are corrupted, each in one of
// four ways drawn uniformly: its value violates its schema, its member is
// left out, its id is written again in place of the next entry's (so the
// next id goes missing; the last entry's member is written twice), or it
// is written under an id not in the pack ("zz" and its id). The draws are
// seeded by the request's tasks, so a request always gets the same answer.
//
// Position bias ([Config.PositionBias] p) makes entries wrong the further
// they sit in the pack, as models answering many questions at once do: the
// entry at position i (from 0) of a pack of k is wrong with probability
// p·i/(k-1). A wrong entry is valid against its schema but is another
// value than the task's answer alone (drawn again until it differs, up to
// 8 draws), so only a check that runs the task alone can tell. [PackSize]
// tells a packed request's number of tasks. [Model.Stats] counts packed
// answers, corrupted entries and wrong (biased) ones.
//
// # Timing and failures
//
// Each call takes [Config.Latency] (one forward pass) plus
// [Config.PerToken] per generated token, scaled by a seeded jitter. A
// stream ([Model.Stream]) gets the first token after the forward pass and
// the rest of the text as it is decoded, in pieces of at most
// [StreamPieceTokens] tokens, each when its last token is. A share of
// calls ([Config.FailRate]) fail with a transient overload error after one
// forward pass, as a busy server answers 503.
//
// # Media
//
// The simulator takes every kind of content part ([Model.Capabilities]):
// images by bytes, data: URL or https URL, audio, and documents by bytes,
// URL or file id. It fetches nothing and looks at no pixels: a message's
// task is its text parts, and each media part adds to the usage's prompt
// tokens what the provider chosen by [Config.MediaTokens]
// (sim://?media_tokens=openai|anthropic; OpenAI's by default) would bill
// for it, counted by package internal/media from the part's size, pages
// or duration (read from its bytes where not given): OpenAI's 512-px
// tiles (170 tokens each plus 85; 85 at detail "low"), Anthropic's
// width×height/750, 1,500 tokens a PDF page, 10 tokens a second of audio.
// [BilledPromptTokens] is that count, for dry runs. Text-only requests
// cost what they always did.
//
// # Addressing
//
// [ParseURL] reads the "sim://" URL form used by jobs and the CLI, e.g.
// "sim://?latency=60ms&tool_turns=1&fail=0.02&seed=1" (add corrupt=0.1 to
// corrupt a tenth of packed entries, media_tokens=anthropic to bill media
// as Anthropic does).
//
// # Over HTTP
//
// Package [github.com/batchagent/batchagent/backend/sim/simhttp] serves the
// same model as an OpenAI-compatible chat-completions server (`batchagent
// sim serve`) whose timing models a continuous-batching GPU server. Its
// answers are this package's [Model]'s, and it counts tokens with the same
// simulated tokenizer ([Tokens]).
package sim
