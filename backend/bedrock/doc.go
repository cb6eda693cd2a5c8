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
// When a request asks for structured output ([llm.Request.Output]) and
// carries no tools, the schema becomes the input schema of a tool named
// like the output (Output.Name, "output" by default) that the model is
// forced to call. The tool's input is returned as the message's content, as
// compact JSON, with finish reason stop and no tool calls. When the request
// also has tools the output tool is not added: the agent may need to call
// its tools first, and the prompt already carries the schema.
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
