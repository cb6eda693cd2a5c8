package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// responses answers POST /v1/responses, OpenAI's Responses API, mapped
// onto a chat completion: the request becomes one (see chatOfResponses),
// runs through the same modes (passthrough or agent), and its answer is
// written as a Responses object, or as its stream of events.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	call, ok := s.begin(w, r, "response")
	defer call.end()
	if !ok {
		return
	}
	start, c := call.start, call.client
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		call.refuse(s.bodyError(err))
		return
	}
	rr, cr, e := chatOfResponses(body)
	if e != nil {
		call.refuse(e)
		return
	}
	call.model = cr.Model
	m, input, e := s.modeFor(cr, batchagent.Interactive)
	if e != nil {
		call.refuse(e)
		return
	}
	if m, e = s.withCap(c, m, cr.Model); e != nil {
		call.refuse(e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	end := func(string, llm.Usage, error) {}
	if s.cfg.Tracer != nil {
		ctx, end = s.cfg.Tracer.Request(ctx, cr.Model, input)
	}
	rw := &responseWriter{w: w, rr: rr, id: newID("resp_"), created: start.Unix()}
	var ttft time.Duration
	err = rw.run(ctx, m, func() {
		if ttft == 0 {
			ttft = max(time.Since(start), time.Nanosecond)
		}
	})
	end(rw.text.String(), rw.usage, err)
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Call(cr.Model, ttft, time.Since(start), rw.usage, err)
	}
	if err != nil {
		call.failed(err, errorOf(err).status)
	}
}

// chatOfResponses reads a Responses request body and returns it with the
// chat completion it maps onto, or the 400 to answer, naming the field
// at fault: a field the gateway does not map (previous_response_id,
// reasoning, include, ...), an input item or content part of a type it
// does not take, a tool that is not a function.
func chatOfResponses(body []byte) (*oaiwire.ResponsesRequest, *oaiwire.Request, *apiError) {
	if je := oaiwire.CheckJSON(body); je != nil {
		return nil, nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", param: je.Param(), message: "request body: " + je.Error()}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: "request body is not a Responses request: " + err.Error()}
	}
	for _, k := range slices.Sorted(mapKeys(fields)) {
		if !slices.Contains(oaiwire.ResponsesFields, k) {
			return nil, nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_parameter", param: k,
				message: fmt.Sprintf("%s is not supported by this gateway's /v1/responses (it maps %s onto a chat completion)", k, strings.Join(oaiwire.ResponsesFields, ", "))}
		}
	}
	var rr oaiwire.ResponsesRequest
	if err := json.Unmarshal(body, &rr); err != nil {
		return nil, nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", message: "request body is not a Responses request: " + err.Error()}
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	type tool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	chat := map[string]any{"model": rr.Model}
	var msgs []map[string]any
	if rr.Instructions != nil && *rr.Instructions != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": *rr.Instructions})
	}
	in, e := responsesInput(rr.Input)
	if e != nil {
		return nil, nil, e
	}
	msgs = append(msgs, in...)
	chat["messages"] = msgs
	if len(rr.Tools) > 0 {
		tools := make([]tool, len(rr.Tools))
		for i, t := range rr.Tools {
			if t.Type != "function" {
				return nil, nil, badParam(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("tool type %q is not supported (only function)", t.Type))
			}
			if t.Name == "" {
				return nil, nil, badParam(fmt.Sprintf("tools[%d].name", i), "a function tool needs a name")
			}
			tools[i] = tool{Type: "function", Function: fn{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
		}
		chat["tools"] = tools
	}
	if tc := bytes.TrimSpace(rr.ToolChoice); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		var mode string
		switch {
		case json.Unmarshal(tc, &mode) == nil && (mode == "auto" || mode == "none" || mode == "required"):
			chat["tool_choice"] = mode
		case json.Unmarshal(tc, &named) == nil && named.Type == "function" && named.Name != "":
			chat["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": named.Name}}
		default:
			return nil, nil, badParam("tool_choice", `tool_choice must be "auto", "none", "required" or {"type":"function","name":NAME}`)
		}
	}
	if rr.MaxOutputTokens != nil {
		if *rr.MaxOutputTokens < 1 {
			return nil, nil, badParam("max_output_tokens", "max_output_tokens must be positive")
		}
		chat["max_completion_tokens"] = *rr.MaxOutputTokens
	}
	if rr.Temperature != nil {
		chat["temperature"] = *rr.Temperature
	}
	if rr.TopP != nil {
		chat["top_p"] = *rr.TopP
	}
	if rr.Text != nil && rr.Text.Format != nil {
		f := rr.Text.Format
		switch f.Type {
		case "", "text":
		case "json_object":
			chat["response_format"] = map[string]string{"type": "json_object"}
		case "json_schema":
			if len(f.Schema) == 0 {
				return nil, nil, badParam("text.format.schema", "a json_schema format needs a schema")
			}
			chat["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}}
		default:
			return nil, nil, badParam("text.format.type", fmt.Sprintf("unknown text format %q (want text, json_object or json_schema)", f.Type))
		}
	}
	b, err := json.Marshal(chat)
	if err != nil {
		return nil, nil, badParam("", "request body: "+err.Error())
	}
	var cr oaiwire.Request
	if err := json.Unmarshal(b, &cr); err != nil {
		return nil, nil, badParam("input", "input: "+err.Error())
	}
	return &rr, &cr, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// responsesInput returns the chat messages of a Responses input: a
// string (one user message) or an array of items.
func responsesInput(raw json.RawMessage) ([]map[string]any, *apiError) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, badParam("input", "input is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []map[string]any{{"role": "user", "content": one}}, nil
	}
	var items []oaiwire.ResponsesItem
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, badParam("input", "input must be a string or a non-empty array of items")
	}
	var msgs []map[string]any
	for i, it := range items {
		switch it.Type {
		case "", "message":
			switch it.Role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, badParam(fmt.Sprintf("input[%d].role", i), fmt.Sprintf("unknown role %q (want user, system, developer or assistant)", it.Role))
			}
			content, e := responsesContent(fmt.Sprintf("input[%d].content", i), it.Content)
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, map[string]any{"role": it.Role, "content": content})
		case "function_call":
			if it.Name == "" || it.CallID == "" {
				return nil, badParam(fmt.Sprintf("input[%d]", i), "a function_call item needs name and call_id")
			}
			call := map[string]any{"id": it.CallID, "type": "function", "function": map[string]string{"name": it.Name, "arguments": it.Arguments}}
			// Calls in a row are one assistant turn's.
			if n := len(msgs); n > 0 && msgs[n-1]["role"] == "assistant" && msgs[n-1]["tool_calls"] != nil {
				msgs[n-1]["tool_calls"] = append(msgs[n-1]["tool_calls"].([]map[string]any), call)
				continue
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{call}})
		case "function_call_output":
			if it.CallID == "" {
				return nil, badParam(fmt.Sprintf("input[%d].call_id", i), "a function_call_output item needs call_id")
			}
			out, e := responsesContent(fmt.Sprintf("input[%d].output", i), it.Output)
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": it.CallID, "content": out})
		default:
			return nil, badParam(fmt.Sprintf("input[%d].type", i), fmt.Sprintf("input item type %q is not supported (want message, function_call or function_call_output)", it.Type))
		}
	}
	return msgs, nil
}

// responsesContent returns a chat message's content for a Responses
// message's: a string as it is, content parts as chat's (text and
// image_url).
func responsesContent(param string, raw json.RawMessage) (any, *apiError) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one, nil
	}
	var parts []oaiwire.ResponsesPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, badParam(param, param+" must be a string or an array of content parts")
	}
	out := make([]map[string]any, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			out[j] = map[string]any{"type": "text", "text": p.Text}
		case "input_image":
			img := map[string]string{"url": p.ImageURL}
			if p.Detail != "" {
				img["detail"] = p.Detail
			}
			out[j] = map[string]any{"type": "image_url", "image_url": img}
		default:
			return nil, badParam(fmt.Sprintf("%s[%d].type", param, j), fmt.Sprintf("content part type %q is not supported (want input_text, output_text or input_image)", p.Type))
		}
	}
	return out, nil
}

// responseItem is an output item of a Responses answer: a message or a
// function call.
type responseItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Role      string          `json:"role,omitempty"`
	Content   []responseText  `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	raw       strings.Builder // the text or the arguments so far
}

// responseText is the output_text part of a message item.
type responseText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// responseWriter writes one Responses answer: whole, or as its events.
type responseWriter struct {
	w       http.ResponseWriter
	rr      *oaiwire.ResponsesRequest
	id      string
	created int64

	items     []*responseItem
	open      *responseItem // the item being streamed
	calls     map[int]*responseItem
	text      strings.Builder // all the output text, for the span
	usage     llm.Usage
	finish    llm.FinishReason
	wrote     bool // the stream's headers and response.created are out
	seq       int
	streamErr error // a write to the client failed
}

// run runs m and writes its answer; first is called at its first chunk.
func (rw *responseWriter) run(ctx context.Context, m mode, first func()) error {
	for c, err := range m.chunks(ctx, func() {}) {
		if err != nil {
			rw.fail(err)
			return err
		}
		first()
		if rw.rr.Stream && !rw.wrote {
			rw.begin()
		}
		switch c.kind {
		case chunkText:
			rw.addText(c.text)
		case chunkToolCall:
			rw.addCall(c.toolCall)
		case chunkUsage:
			rw.usage = c.usage
		case chunkFinish:
			rw.finish = c.finish
		}
		if rw.streamErr != nil {
			return errClientGone
		}
	}
	if rw.rr.Stream && !rw.wrote {
		rw.begin()
	}
	rw.close()
	obj := rw.object("completed")
	if !rw.rr.Stream {
		rw.w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(rw.w).Encode(obj)
	}
	rw.event("response.completed", map[string]any{"response": obj})
	if rw.streamErr != nil {
		return errClientGone
	}
	return nil
}

// begin writes the stream's headers and its response.created and
// response.in_progress events.
func (rw *responseWriter) begin() {
	rw.wrote = true
	h := rw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rw.w.WriteHeader(http.StatusOK)
	obj := rw.object("in_progress")
	rw.event("response.created", map[string]any{"response": obj})
	rw.event("response.in_progress", map[string]any{"response": obj})
}

// event writes one SSE event of typ with fields (type and sequence_number
// added), when streaming.
func (rw *responseWriter) event(typ string, fields map[string]any) {
	if !rw.rr.Stream || rw.streamErr != nil {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = rw.seq
	rw.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		rw.streamErr = err
		return
	}
	if _, err := fmt.Fprintf(rw.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		rw.streamErr = err
		return
	}
	if err := http.NewResponseController(rw.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		rw.streamErr = err
	}
}

func (rw *responseWriter) addText(t string) {
	rw.text.WriteString(t)
	if rw.open == nil || rw.open.Type != "message" {
		rw.close()
		it := &responseItem{Type: "message", ID: newID("msg_"), Status: "in_progress", Role: "assistant"}
		rw.start(it)
		rw.event("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": len(rw.items) - 1, "content_index": 0,
			"part": responseText{Type: "output_text", Annotations: []any{}}})
	}
	rw.open.raw.WriteString(t)
	rw.event("response.output_text.delta", map[string]any{"item_id": rw.open.ID, "output_index": len(rw.items) - 1, "content_index": 0, "delta": t})
}

func (rw *responseWriter) addCall(d llm.ToolCallDelta) {
	it, ok := rw.calls[d.Index]
	if !ok {
		rw.close()
		if rw.calls == nil {
			rw.calls = map[int]*responseItem{}
		}
		callID := d.ID
		if callID == "" {
			callID = newID("call_")
		}
		empty := ""
		it = &responseItem{Type: "function_call", ID: newID("fc_"), Status: "in_progress", CallID: callID, Name: d.Name, Arguments: &empty}
		rw.calls[d.Index] = it
		rw.start(it)
	} else if it != rw.open {
		// A delta of a call closed before: the arguments still grow.
		it.raw.WriteString(d.Arguments)
		return
	}
	if d.Arguments != "" {
		it.raw.WriteString(d.Arguments)
		rw.event("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": slices.Index(rw.items, it), "delta": d.Arguments})
	}
}

// start opens it as the item being streamed.
func (rw *responseWriter) start(it *responseItem) {
	rw.items = append(rw.items, it)
	rw.open = it
	added := &responseItem{Type: it.Type, ID: it.ID, Status: it.Status, Role: it.Role, CallID: it.CallID, Name: it.Name, Arguments: it.Arguments}
	if it.Type == "message" {
		added.Content = []responseText{}
	}
	rw.event("response.output_item.added", map[string]any{"output_index": len(rw.items) - 1, "item": added})
}

// close ends the item being streamed, if any.
func (rw *responseWriter) close() {
	it := rw.open
	if it == nil {
		return
	}
	rw.open = nil
	i := slices.Index(rw.items, it)
	it.Status = "completed"
	switch it.Type {
	case "message":
		part := responseText{Type: "output_text", Text: it.raw.String(), Annotations: []any{}}
		it.Content = []responseText{part}
		rw.event("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": part.Text})
		rw.event("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part})
	case "function_call":
		args := it.raw.String()
		it.Arguments = &args
		rw.event("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": args})
	}
	rw.event("response.output_item.done", map[string]any{"output_index": i, "item": it})
}

// object is the Responses object in status.
func (rw *responseWriter) object(status string) map[string]any {
	rr := rw.rr
	output := make([]*responseItem, 0, len(rw.items))
	if status != "in_progress" {
		for _, it := range rw.items {
			if it.Type == "function_call" && it.Arguments != nil && *it.Arguments != it.raw.String() {
				args := it.raw.String()
				it.Arguments = &args
			}
			output = append(output, it)
		}
	}
	var incomplete any
	if status == "completed" && rw.finish == llm.FinishLength {
		status = "incomplete"
		incomplete = map[string]string{"reason": "max_output_tokens"}
	}
	tools := []oaiwire.ResponsesTool{}
	if rr.Tools != nil {
		tools = rr.Tools
	}
	toolChoice := json.RawMessage(`"auto"`)
	if len(rr.ToolChoice) > 0 {
		toolChoice = rr.ToolChoice
	}
	text := any(map[string]any{"format": map[string]string{"type": "text"}})
	if rr.Text != nil {
		text = rr.Text
	}
	metadata := json.RawMessage(`{}`)
	if len(rr.Metadata) > 0 {
		metadata = rr.Metadata
	}
	obj := map[string]any{
		"id": rw.id, "object": "response", "created_at": rw.created, "status": status, "model": rr.Model,
		"output": output, "error": nil, "incomplete_details": incomplete, "instructions": rr.Instructions,
		"max_output_tokens": rr.MaxOutputTokens, "temperature": rr.Temperature, "top_p": rr.TopP,
		"tools": tools, "tool_choice": toolChoice, "text": text, "metadata": metadata,
		"parallel_tool_calls": rr.ParallelToolCalls == nil || *rr.ParallelToolCalls, "previous_response_id": nil,
		"store": false, "usage": nil,
	}
	if status != "in_progress" {
		var u oaiwire.ResponsesUsage
		u.InputTokens = rw.usage.PromptTokens
		u.InputTokensDetails.CachedTokens = rw.usage.CachedTokens
		u.OutputTokens = rw.usage.CompletionTokens
		u.TotalTokens = u.InputTokens + u.OutputTokens
		obj["usage"] = u
	}
	return obj
}

// fail reports err: an error status while nothing is out, else an error
// event (the npm client throws it), with no response.completed.
func (rw *responseWriter) fail(err error) {
	e := errorOf(err)
	if !rw.wrote {
		writeError(rw.w, e)
		return
	}
	var b struct{ Error oaiwire.ErrorBody }
	_ = json.Unmarshal(e.body(rw.w.Header().Get(requestIDHeader)), &b) // our own JSON: cannot fail
	rw.event("error", map[string]any{"code": b.Error.Code, "message": b.Error.Message, "param": e.param})
}
