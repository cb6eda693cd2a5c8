// Package bedrock is the AWS Bedrock backend: an [llm.Model] and
// [llm.Streamer] over the Converse and ConverseStream APIs, built on the
// official AWS SDK for Go v2. It is the only package of batchagent that
// imports the AWS SDK.
//
// # Requests
//
// System messages become Converse's system blocks, followed by a cachePoint
// block; tool definitions become toolConfig.tools, followed by a cachePoint
// entry, so the prefix every agent of a job shares (system prompt and tools)
// is cached by the models that support prompt caching
// ([Config.DisableCachePoints] turns the markers off for models that reject
// them). Assistant tool calls become toolUse blocks; tool results become a
// user message of toolResult blocks, consecutive results merged into one
// message, with status "error" for failed tools.
//
// # Structured output
//
// When a request asks for structured output ([llm.Request.Output]), the
// schema becomes the input schema of a tool named like the output
// (Output.Name, "output" by default). The tool's input is returned as the
// message's content, as compact JSON, with finish reason stop and no tool
// calls; any text beside it is dropped.
//
// A request without tools forces the model to call the output tool
// (toolChoice "tool"). A request with tools offers the output tool after
// them with toolChoice "any": the model must either call one of the
// request's tools or give its final answer through the output tool, so a
// tool-using agent gets native structured output too. Bedrock takes "any"
// only from some model families; the backend sends it when the model ID (or
// the inference profile's ID or ARN) names Anthropic Claude
// ("anthropic.claude"), Amazon Nova ("amazon.nova") or Mistral Large
// ("mistral.mistral-large"), and otherwise leaves toolChoice out, which is
// "auto": the model may then also answer in text, which comes back as the
// answer for the caller to validate. When a tool of the request already has
// the output's name, the output tool takes the first free name of name_2,
// name_3... (shortened to Converse's 64 characters), the same on every
// turn, and a call of the request's tool stays a tool call.
//
// A message that calls request tools and the output tool at once returns
// the calls of the request tools, with the message's text, and drops the
// output call: the model answers again once it has the tools' results, and
// the conversation sent back then holds only the calls the agent answered,
// every toolUse with its toolResult, as Converse requires. Of several
// output calls in one message, the first counts. Streams hold the text of
// an answer with structured output back until the end, since the output
// tool's input may replace it.
//
// # Media
//
// A message's [llm.Part] values become Converse content blocks: an image
// as an image block (format png, jpeg, gif or webp; its bytes, or those of
// a data: URL), a document as a document block (pdf, and csv, html, txt,
// md, doc, docx, xls, xlsx by media type). Converse wants each document
// named, by letters, digits, single spaces, hyphens, parentheses and
// square brackets, at most 200 long, and the names of one request apart:
// the name is the part's Filename without its extension or directory,
// other characters made spaces ("document" when none is left), and
// " (2)", " (3)"... added to a repeated one. A tool message's parts go
// into its toolResult. Converse takes nothing by URL and no audio:
// [Model.Capabilities] declares images and documents as bytes, and a
// request carrying another part fails with [llm.ErrBadRequest], naming the
// message and part, before anything is sent.
//
// # Errors
//
// Every failure is an [*llm.APIError] with Backend "bedrock" wrapping a
// class: ThrottlingException (and ServiceQuotaExceededException) is
// [llm.ErrRateLimited]; ServiceUnavailableException and
// ModelNotReadyException are [llm.ErrOverloaded]; InternalServerException,
// ModelStreamErrorException, other 5xx and malformed responses are
// [llm.ErrServer]; ModelTimeoutException is [llm.ErrTimeout]; a
// ValidationException about the input's length is [llm.ErrContextLength],
// other ones, other 4xx and a model's refusal of cache points are
// [llm.ErrBadRequest]; refused or missing credentials are [llm.ErrAuth]; a broken connection, or an event stream
// that ends before its messageStop event, is [llm.ErrConnection]. A
// Converse body over [llm.BodyLimit], or a streamed structured answer
// (held back until it ends) over [llm.AnswerLimit], of maxTokens is
// [llm.ErrTruncated]; stopReason max_tokens is [llm.FinishLength]. The
// SDK's own retries are off: batchagent's agent loop owns retries.
//
// # Addressing
//
// [ParseURL] reads the "bedrock://" URL form used by jobs and the CLI, e.g.
// "bedrock://us-east-1?model=anthropic.claude-3-5-haiku-20241022-v1:0".
// Credentials never appear in URLs: they come from the default AWS
// credential chain or from [Config.Credentials].
package bedrock
