package simhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/internal/gen"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// apiError is an error answer in OpenAI's format.
type apiError struct {
	status     int
	typ, code  string
	message    string
	retryAfter time.Duration // sent as Retry-After when > 0
}

var (
	errMethod     = &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed", message: "method not allowed"}
	errNotFound   = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "no such endpoint"}
	errAuth       = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key", message: "incorrect API key provided"}
	errNotRunning = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "overloaded", message: "server is not running"}
	errFull       = &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded", message: "server queue is full, retry later", retryAfter: time.Second}
)

// faultErrors are the answers of the faults that fail at once.
var faultErrors = map[Fault]*apiError{
	FaultRateLimited: {status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded", message: "simulated rate limit", retryAfter: time.Second},
	FaultOverloaded:  {status: http.StatusServiceUnavailable, typ: "server_error", code: "overloaded", message: "simulated overload"},
	FaultServerError: {status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", message: "simulated server error"},
	FaultBadRequest:  {status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_value", message: "simulated bad request"},
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_value", message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if d := e.retryAfter; d > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
		if d%time.Second != 0 {
			h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
		}
	}
	w.WriteHeader(e.status)
	w.Write(append(oaiwire.ErrorBody{Message: e.message, Type: e.typ, Code: e.code}.AppendJSON(nil), '\n'))
}

// decode turns a chat request into the simulator's request, the rendered
// prompt the prefix cache and the token count see, and the max_tokens
// limit (0: none).
func decode(cr *oaiwire.Request) (req *llm.Request, prompt []byte, maxTokens int, apiErr *apiError) {
	if len(cr.Messages) == 0 {
		return nil, nil, 0, badRequest("messages must not be empty")
	}
	req = &llm.Request{Model: cr.Model}
	for _, p := range []*int{cr.MaxTokens, cr.MaxCompletionTokens} {
		if p == nil {
			continue
		}
		if *p < 1 {
			return nil, nil, 0, badRequest("max_tokens must be at least 1, got %d", *p)
		}
		maxTokens = *p // max_completion_tokens wins
	}
	req.MaxTokens = maxTokens

	var bad int
	if req.Tools, bad = cr.LLMTools(); bad >= 0 {
		return nil, nil, 0, badRequest("tools[%d]: want a function with a name", bad)
	}
	var toolsJSON []byte
	if len(cr.Tools) > 0 {
		var err error
		if toolsJSON, err = json.Marshal(cr.Tools); err != nil {
			return nil, nil, 0, badRequest("tools: %v", err)
		}
	}
	if apiErr := chooseTools(cr, req); apiErr != nil {
		return nil, nil, 0, apiErr
	}
	if f := cr.ResponseFormat; f != nil {
		switch f.Type {
		case "", "text":
		case "json_object":
			req.Output = &llm.OutputSpec{Name: "output", Schema: json.RawMessage(`{"type":"object"}`)}
		case "json_schema":
			if f.JSONSchema == nil {
				return nil, nil, 0, badRequest("response_format: json_schema is missing")
			}
			schema := f.JSONSchema.Schema
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			req.Output = &llm.OutputSpec{Name: f.JSONSchema.Name, Schema: schema}
		default:
			return nil, nil, 0, badRequest("response_format: unknown type %q", f.Type)
		}
	}

	msgs, fault := cr.LLMMessagesWithMedia()
	if fault != nil {
		return nil, nil, 0, messageError(fault)
	}
	req.Messages = msgs

	// The prompt: leading system messages, the tools, then the rest, in
	// a ChatML-like template.
	toolsDone := false
	renderTools := func() {
		if !toolsDone && toolsJSON != nil {
			prompt = append(prompt, "<|im_start|>tools\n"...)
			prompt = append(prompt, toolsJSON...)
			prompt = append(prompt, "<|im_end|>\n"...)
		}
		toolsDone = true
	}
	for _, msg := range req.Messages {
		if msg.Role != llm.RoleSystem {
			renderTools()
		}
		prompt = append(prompt, "<|im_start|>"...)
		prompt = append(prompt, msg.Role...)
		prompt = append(prompt, '\n')
		prompt = append(prompt, msg.Content...)
		for _, p := range msg.Parts {
			if p.Kind == llm.PartText {
				prompt = append(prompt, p.Text...)
			}
		}
		for _, c := range msg.ToolCalls {
			prompt = append(prompt, "\n<tool_call>"...)
			prompt = append(prompt, c.Name...)
			prompt = append(prompt, ' ')
			prompt = append(prompt, c.Arguments...)
			prompt = append(prompt, "</tool_call>"...)
		}
		prompt = append(prompt, "<|im_end|>\n"...)
	}
	renderTools()
	prompt = append(prompt, "<|im_start|>assistant\n"...)
	return req, prompt, maxTokens, nil
}

// messageError is the answer to a message that the simulator refuses.
func messageError(f *oaiwire.MessageError) *apiError {
	switch f.Fault {
	case oaiwire.FaultContent:
		return badRequest("messages[%d].content: %v", f.Message, f.Err)
	case oaiwire.FaultToolName:
		return badRequest("messages[%d].tool_calls[%d]: function name is missing", f.Message, f.Call)
	case oaiwire.FaultToolCallID:
		return badRequest("messages[%d]: a tool message needs tool_call_id", f.Message)
	default:
		return badRequest("messages[%d]: unknown role %q", f.Message, f.Role)
	}
}

// chooseTools applies cr's tool_choice to req: "none" lets the model
// call no tool, a named function only that one.
func chooseTools(cr *oaiwire.Request, req *llm.Request) *apiError {
	c := bytes.TrimSpace(cr.ToolChoice)
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	var mode string
	if json.Unmarshal(c, &mode) == nil {
		switch mode {
		case "none":
			req.Tools = nil
		case "auto", "required":
		default:
			return badRequest("tool_choice: unknown mode %q", mode)
		}
		return nil
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(c, &named); err != nil {
		return badRequest("tool_choice: %v", err)
	}
	for _, t := range req.Tools {
		if t.Name == named.Function.Name {
			req.Tools = []llm.ToolDef{t}
			return nil
		}
	}
	return badRequest("tool_choice: no tool named %q", named.Function.Name)
}

// answer is what a sequence outputs, laid out as bytes: the content, then
// each tool call's name and arguments. Token k of a sequence releases the
// layout up to byte 4k.
type answer struct {
	content string
	calls   []llm.ToolCall
	finish  llm.FinishReason
	size    int
}

func newAnswer(resp *llm.Response) answer {
	a := answer{content: resp.Message.Content, calls: resp.Message.ToolCalls, finish: resp.FinishReason}
	a.size = len(a.content)
	for _, c := range a.calls {
		a.size += len(c.Name) + len(c.Arguments)
	}
	if a.finish == "" {
		a.finish = llm.FinishStop
	}
	return a
}

// truncate cuts the answer to n bytes, as generation stopped by
// max_tokens: tool calls past the cut are dropped and the one it falls in
// keeps part of its arguments.
func (a *answer) truncate(n int) {
	a.finish = llm.FinishLength
	if n <= len(a.content) {
		a.content = a.content[:runeCut(a.content, n)]
		a.calls = nil
		a.size = len(a.content)
		return
	}
	rest := n - len(a.content)
	for i, c := range a.calls {
		need := len(c.Name) + len(c.Arguments)
		if need <= rest {
			rest -= need
			continue
		}
		if rest <= len(c.Name) {
			a.calls = a.calls[:i:i]
		} else {
			args := c.Arguments[:runeCut(string(c.Arguments), rest-len(c.Name))]
			a.calls = append(a.calls[:i:i], llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
		break
	}
	a.size = len(a.content)
	for _, c := range a.calls {
		a.size += len(c.Name) + len(c.Arguments)
	}
}

// runeCut returns the largest n' <= n that does not split a character.
func runeCut(s string, n int) int {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// byteAt returns the byte at position i of the layout.
func (a *answer) byteAt(i int) byte {
	if i < len(a.content) {
		return a.content[i]
	}
	i -= len(a.content)
	for _, c := range a.calls {
		if i < len(c.Name) {
			return c.Name[i]
		}
		i -= len(c.Name)
		if i < len(c.Arguments) {
			return c.Arguments[i]
		}
		i -= len(c.Arguments)
	}
	return 0
}

// cursor returns the end of the layout released by k tokens, moved
// forward so as not to split a character.
func (a *answer) cursor(k int) int {
	end := min(k*sim.BytesPerToken, a.size)
	for end < a.size && !utf8.RuneStart(a.byteAt(end)) {
		end++
	}
	return end
}

// appendDeltas appends the stream chunks of layout bytes [from, to), one
// per delta.
func (a *answer) appendDeltas(b []byte, c *chunker, from, to int) []byte {
	if from < len(a.content) {
		d := append(c.scratch[:0], `{"content":`...)
		d = gen.AppendJSONString(d, a.content[from:min(to, len(a.content))])
		c.scratch = append(d, '}')
		b = c.appendChunk(b, c.scratch, "null")
	}
	start := len(a.content)
	for i, call := range a.calls {
		end := start + len(call.Name) + len(call.Arguments)
		if to <= start || from >= end {
			start = end
			continue
		}
		if from <= start {
			d := append(c.scratch[:0], `{"tool_calls":[{"index":`...)
			d = strconv.AppendInt(d, int64(i), 10)
			d = append(d, `,"id":`...)
			d = gen.AppendJSONString(d, call.ID)
			d = append(d, `,"type":"function","function":{"name":`...)
			d = gen.AppendJSONString(d, call.Name)
			c.scratch = append(d, `,"arguments":""}}]}`...)
			b = c.appendChunk(b, c.scratch, "null")
		}
		argStart := start + len(call.Name)
		if lo, hi := max(from, argStart)-argStart, min(to, end)-argStart; hi > lo {
			d := append(c.scratch[:0], `{"tool_calls":[{"index":`...)
			d = strconv.AppendInt(d, int64(i), 10)
			d = append(d, `,"function":{"arguments":`...)
			d = gen.AppendJSONString(d, string(call.Arguments[lo:hi]))
			c.scratch = append(d, "}}]}"...)
			b = c.appendChunk(b, c.scratch, "null")
		}
		start = end
	}
	return b
}

// chunker frames the stream chunks of one response.
type chunker struct {
	meta         []byte // `data: {"id":...,"object":...,"created":...,"model":...`
	head         []byte // meta + `,"choices":[{"index":0,"delta":`
	includeUsage bool
	scratch      []byte // a delta being built
}

func newChunker(id, model string, created int64, includeUsage bool) *chunker {
	m := []byte(`data: {"id":`)
	m = gen.AppendJSONString(m, id)
	m = append(m, `,"object":"chat.completion.chunk","created":`...)
	m = strconv.AppendInt(m, created, 10)
	m = append(m, `,"model":`...)
	m = gen.AppendJSONString(m, model)
	h := append(m[:len(m):len(m)], `,"choices":[{"index":0,"delta":`...)
	return &chunker{meta: m, head: h, includeUsage: includeUsage}
}

// appendChunk appends one chunk event with the delta JSON and the finish
// reason JSON ("null" or a string).
func (c *chunker) appendChunk(b, delta []byte, finish string) []byte {
	b = append(b, c.head...)
	b = append(b, delta...)
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = append(b, finish...)
	b = append(b, "}]"...)
	if c.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// appendUsage appends the last chunk of a stream that asked for usage: no
// choices, and the usage.
func (c *chunker) appendUsage(b []byte, u *oaiwire.Usage) []byte {
	b = append(b, c.meta...)
	b = append(b, `,"choices":[],"usage":`...)
	ub, _ := json.Marshal(u) // a struct of ints: cannot fail
	b = append(b, ub...)
	return append(b, "}\n\n"...)
}

// usage is the usage object of an answer: media is the part of prompt
// that is media, reported as prompt_tokens_details.media_tokens.
func usage(prompt, completion, cached, media int) *oaiwire.Usage {
	return oaiwire.NewUsage(llm.Usage{PromptTokens: int64(prompt), CompletionTokens: int64(completion), CachedTokens: int64(cached), MediaTokens: int64(media)})
}

// job is one accepted chat-completion request.
type job struct {
	id           string
	model        string
	created      int64
	stream       bool
	includeUsage bool
	ans          answer
	q            *seq
	fault        Fault // injected into the answer: stream_cut, malformed or none
	media        int   // the part of q.prompt that is media
	tasks        int   // tasks the request carries: a pack's, else 1
}

// prepare decodes a chat request, generates its answer with the
// simulated model and builds its sequence. It returns an apiError for a
// request the server refuses, or ctx's error.
func (s *Server) prepare(ctx context.Context, cr *oaiwire.Request) (*job, *apiError, error) {
	req, prompt, maxTokens, apiErr := decode(cr)
	if apiErr != nil {
		return nil, apiErr, nil
	}
	// Media parts are billed as the in-process model's media_tokens
	// says (OpenAI's tiles by default), on top of the rendered text.
	media := sim.MediaTokens(req, s.cfg.Model.MediaTokens)
	promptTokens := sim.Tokens(len(prompt)) + media
	if promptTokens > s.cfg.ContextWindow || maxTokens > 0 && promptTokens+maxTokens > s.cfg.ContextWindow {
		return nil, &apiError{
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded",
			message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				s.cfg.ContextWindow, promptTokens+maxTokens, promptTokens, maxTokens),
		}, nil
	}
	resp, err := s.model.Generate(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if ae, ok := errors.AsType[*llm.APIError](err); ok && ae.StatusCode == http.StatusServiceUnavailable {
			return nil, faultErrors[FaultOverloaded], nil
		}
		return nil, badRequest("%v", err), nil
	}
	a := newAnswer(resp)
	total := sim.Tokens(a.size)
	if maxTokens > 0 && total > maxTokens {
		a.truncate(maxTokens * sim.BytesPerToken)
		total = maxTokens
	}
	if s.cache != nil && blocksFor(promptTokens+total) > s.cache.capacity {
		return nil, &apiError{
			status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded",
			message: fmt.Sprintf("This request needs %d tokens of KV cache (%d in the messages, %d in the completion); the server's KV cache holds %d.",
				promptTokens+total, promptTokens, total, s.cache.capacity*blockTokens),
		}, nil
	}
	model := cr.Model
	if model == "" {
		model = s.cfg.ModelName
	}
	j := &job{
		id:      "chatcmpl-" + strconv.FormatUint(s.ids.Add(1), 10),
		model:   model,
		created: time.Now().Unix(),
		stream:  cr.Stream,
		ans:     a,
		q:       newSeq(promptTokens, blockHashes(prompt), total),
		media:   media,
		tasks:   max(1, sim.PackSize(req)),
	}
	j.includeUsage = cr.IncludeUsage()
	return j, nil, nil
}

// chat serves POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) { s.serveChat(w, r, s.acct) }

// serveChat answers a chat completion under the rate limits of acct (nil:
// none, as for the lines of a batch).
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, acct *account) {
	s.requests.Add(1)
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if ctx.Err() == nil {
			writeError(w, badRequest("read body: %v", err))
		}
		return
	}
	var cr oaiwire.Request
	if err := json.Unmarshal(body, &cr); err != nil {
		writeError(w, badRequest("invalid JSON body: %v", err))
		return
	}
	fault := s.fault(time.Now())
	if e := faultErrors[fault]; e != nil {
		if s.cfg.RetryAfter > 0 && (fault == FaultRateLimited || fault == FaultOverloaded) {
			c := *e
			c.retryAfter = s.cfg.RetryAfter
			e = &c
		}
		writeError(w, e)
		return
	}
	j, apiErr, err := s.prepare(ctx, &cr)
	switch {
	case err != nil:
		return // the client went away
	case apiErr != nil:
		writeError(w, apiErr)
		return
	}
	j.fault = fault
	if acct != nil {
		if wait, over := acct.take(time.Now(), j.q.prompt+j.q.total, w.Header()); wait > 0 {
			s.limited.Add(1)
			writeError(w, &apiError{status: http.StatusTooManyRequests, typ: over, code: "rate_limit_exceeded",
				message: "Rate limit reached for " + over + " per minute (simulated)", retryAfter: wait})
			return
		}
	}
	switch err := s.enqueue(j.q); {
	case errors.Is(err, errQueueFull):
		writeError(w, errFull)
		return
	case err != nil:
		writeError(w, errNotRunning)
		return
	}
	defer s.leave(j.q)
	s.sizesMu.Lock()
	s.sizes[j.tasks]++
	s.sizesMu.Unlock()
	if j.stream {
		s.stream(w, r, j)
	} else {
		s.respond(w, r, j)
	}
	if s.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		j.q.mu.Lock()
		emitted, cached, qerr := j.q.emitted, j.q.cached, j.q.err
		j.q.mu.Unlock()
		s.cfg.Logger.DebugContext(ctx, "sim request", "id", j.id, "stream", j.stream, "prompt_tokens", j.q.prompt,
			"cached_tokens", cached, "completion_tokens", emitted, "err", qerr)
	}
}

// respond writes a non-streamed answer once the sequence is done.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, j *job) {
	// Only the last token ends the wait, and only it wakes the handler.
	_, cached, _, err := j.q.wait(r.Context(), j.q.total-1)
	switch {
	case r.Context().Err() != nil:
		return
	case err != nil:
		writeError(w, errNotRunning)
		return
	}
	body, err := json.Marshal(&oaiwire.Completion{
		ID: j.id, Object: "chat.completion", Created: j.created, Model: j.model,
		Choices: []oaiwire.Choice{{Message: oaiwire.NewReply(j.ans.content, j.ans.calls), FinishReason: string(j.ans.finish)}},
		Usage:   usage(j.q.prompt, j.q.total, cached, j.media),
	})
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", message: "encode answer"})
		return
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch j.fault {
	case FaultMalformed:
		w.Write(body[:len(body)/2])
	case FaultStreamCut:
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body[:len(body)/2])
		cut(w)
	default:
		w.Write(body)
	}
}

// stream writes a streamed answer: a chunk per delta as the sequence
// generates tokens, flushed as it goes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, j *job) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	c := newChunker(j.id, j.model, j.created, j.includeUsage)
	var buf []byte
	have, sent := 0, 0
	for {
		emitted, cached, done, err := j.q.wait(ctx, have)
		if err != nil {
			return // the client went away, or the server stopped: no terminator
		}
		for k := have + 1; k <= emitted; k++ {
			buf = buf[:0]
			if k == 1 {
				buf = c.appendChunk(buf, []byte(`{"role":"assistant","content":""}`), "null")
			}
			to := j.ans.cursor(k)
			buf = j.ans.appendDeltas(buf, c, sent, to)
			sent = to
			if k == 1 && j.fault == FaultMalformed {
				buf = append(buf, c.head[:len(c.head)/2]...)
				buf = append(buf, "\n\ndata: [DONE]\n\n"...)
				w.Write(buf)
				rc.Flush()
				return
			}
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
			if k == 1 && j.fault == FaultStreamCut {
				cut(w)
				return
			}
		}
		have = emitted
		if !done {
			continue
		}
		buf = c.appendChunk(buf[:0], []byte(`{}`), strconv.Quote(string(j.ans.finish)))
		if j.includeUsage {
			buf = c.appendUsage(buf, usage(j.q.prompt, j.q.total, cached, j.media))
		}
		buf = append(buf, "data: [DONE]\n\n"...)
		w.Write(buf)
		rc.Flush()
		return
	}
}

// cut closes the connection under a response, so that the client sees it
// end early. net/http's documented way to abort a handler, a panic with
// http.ErrAbortHandler, is the fallback where the connection cannot be
// taken over (HTTP/2).
func cut(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
