package openai

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchagent/batchagent/internal/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// defaultOutputName names the response_format schema when
// [llm.OutputSpec.Name] is empty.
const defaultOutputName = "output"

// body returns the JSON of the chat/completions request for req, with
// "stream" and "stream_options" when stream is set. Tool parameter and
// output schemas are sent as the raw JSON they are given (compacted),
// never re-encoded through a map, so that the shared prefix of a batch
// stays byte-identical and prefix caches hit.
//
// The body is written here rather than by the SDK, which stays the
// transport (base URL, key, headers, retries, errors). The SDK's encoder
// walks its parameter types by reflection: 10× the time and 500× the
// allocations for a 20-turn conversation (BenchmarkRequestBody), and
// 15 % of bench agentic's CPU. TestBodyMatchesSDK and FuzzBodyMatchesSDK
// hold the two encodings equal as JSON values.
func (m *Model) body(req *llm.Request, stream bool) ([]byte, error) {
	if req == nil {
		return nil, m.errorf(0, llm.ErrBadRequest, "nil request")
	}
	model := req.Model
	if model == "" {
		model = m.model
	}
	if model == "" && m.maxTokensV2 {
		return nil, m.errorf(0, llm.ErrBadRequest, "no model: set Config.Model or Request.Model")
	}
	b := make([]byte, 0, requestSize(req))
	b = append(b, '{')
	if model != "" { // else the server's default
		b = jsonenc.AppendString(append(b, `"model":`...), model, false)
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	for i := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendMessage(b, &req.Messages[i]); err != nil {
			return nil, m.errorf(0, llm.ErrBadRequest, "message %d: %v", i, err)
		}
	}
	b = append(b, ']')
	var err error
	if b, err = m.appendTools(b, req.Tools); err != nil {
		return nil, err
	}
	if out := req.Output; out != nil {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
		b = jsonenc.AppendString(b, schemaName(out.Name), false)
		b = append(b, `,"strict":false,"schema":`...)
		if b, err = jsonenc.AppendRaw(b, out.Schema, false); err != nil || len(out.Schema) == 0 {
			return nil, m.errorf(0, llm.ErrBadRequest, "output schema is not valid JSON")
		}
		b = append(b, "}}"...)
	}
	if b, err = m.appendSampling(b, req); err != nil {
		return nil, err
	}
	if stream {
		// Servers that ignore stream_options simply send no usage chunk.
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}'), nil
}

// requestSize estimates the bytes of req's body, so that the body is
// allocated once.
func requestSize(req *llm.Request) int {
	n := 256
	for i := range req.Messages {
		n += len(req.Messages[i].Content) + 64
		for _, c := range req.Messages[i].ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments) + 64
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + 64
	}
	if req.Output != nil {
		n += len(req.Output.Schema) + 128
	}
	return n + n/8 // escapes
}

// appendMessage appends msg as a chat message.
func appendMessage(b []byte, msg *llm.Message) ([]byte, error) {
	switch msg.Role {
	case llm.RoleSystem, llm.RoleUser:
		b = append(b, `{"role":"`...)
		b = append(b, msg.Role...)
		b = append(b, `","content":`...)
		return append(jsonenc.AppendString(b, msg.Content, false), '}'), nil
	case llm.RoleTool:
		if msg.ToolCallID == "" {
			return b, fmt.Errorf("tool message without tool_call_id")
		}
		b = jsonenc.AppendString(append(b, `{"role":"tool","content":`...), msg.Content, false)
		b = jsonenc.AppendString(append(b, `,"tool_call_id":`...), msg.ToolCallID, false)
		return append(b, '}'), nil
	case llm.RoleAssistant:
		b = append(b, `{"role":"assistant"`...)
		if msg.Content != "" || len(msg.ToolCalls) == 0 {
			b = jsonenc.AppendString(append(b, `,"content":`...), msg.Content, false)
		}
		if len(msg.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for i, c := range msg.ToolCalls {
				if i > 0 {
					b = append(b, ',')
				}
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				b = jsonenc.AppendString(append(b, `{"id":`...), c.ID, false)
				b = jsonenc.AppendString(append(b, `,"type":"function","function":{"name":`...), c.Name, false)
				b = jsonenc.AppendString(append(b, `,"arguments":`...), args, false)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		return append(b, '}'), nil
	default:
		return b, fmt.Errorf("unknown role %q", msg.Role)
	}
}

// appendTools appends the "tools" member for tools, if any.
func (m *Model) appendTools(b []byte, tools []llm.ToolDef) ([]byte, error) {
	if len(tools) == 0 {
		return b, nil
	}
	b = append(b, `,"tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(append(b, `{"type":"function","function":{"name":`...), t.Name, false)
		if t.Description != "" {
			b = jsonenc.AppendString(append(b, `,"description":`...), t.Description, false)
		}
		if len(t.Parameters) > 0 {
			var err error
			if b, err = jsonenc.AppendRaw(append(b, `,"parameters":`...), t.Parameters, false); err != nil {
				return nil, m.errorf(0, llm.ErrBadRequest, "tool %q: parameters are not valid JSON", t.Name)
			}
		}
		b = append(b, "}}"...)
	}
	return append(b, ']'), nil
}

// appendSampling appends the token cap and the sampling parameters req
// sets.
func (m *Model) appendSampling(b []byte, req *llm.Request) ([]byte, error) {
	if req.MaxTokens > 0 {
		name := `,"max_tokens":`
		if m.maxTokensV2 {
			name = `,"max_completion_tokens":`
		}
		b = strconv.AppendInt(append(b, name...), int64(req.MaxTokens), 10)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{`,"temperature":`, req.Temperature}, {`,"top_p":`, req.TopP}} {
		if f.v == nil {
			continue
		}
		if math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			return nil, m.errorf(0, llm.ErrBadRequest, "%s %v is not a number JSON can carry", strings.Trim(f.name, `,":`), *f.v)
		}
		b, _ = jsonenc.AppendFloat(append(b, f.name...), *f.v)
	}
	if req.Seed != nil {
		b = strconv.AppendInt(append(b, `,"seed":`...), *req.Seed, 10)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range req.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, s, false)
		}
		b = append(b, ']')
	}
	return b, nil
}

// schemaName returns name as OpenAI accepts it: 1 to 64 characters of
// [a-zA-Z0-9_-], others replaced by '_'; "output" when empty.
func schemaName(name string) string {
	if name == "" {
		return defaultOutputName
	}
	var b strings.Builder
	for _, r := range name {
		if b.Len() == 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
