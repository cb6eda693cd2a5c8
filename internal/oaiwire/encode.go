package oaiwire

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchagent/batchagent/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// DefaultOutputName names the response_format schema when
// [llm.OutputSpec.Name] is empty.
const DefaultOutputName = "output"

// RequestOptions are the parts of a request body that do not come from
// the [llm.Request].
type RequestOptions struct {
	// Model is the model's name; "" leaves it out (the server's default).
	Model string
	// MaxCompletionTokens names the token cap "max_completion_tokens"
	// (OpenAI's newer name) rather than "max_tokens".
	MaxCompletionTokens bool
	// Stream asks for a streamed answer with a usage chunk at its end.
	Stream bool
}

// AppendRequest appends the JSON of the chat/completions request for req,
// with "stream" and "stream_options" when o.Stream is set. Tool parameter
// and output schemas are sent as the raw JSON they are given (compacted),
// never re-encoded through a map, so that the shared prefix of a batch
// stays byte-identical and prefix caches hit. It refuses a message of
// unknown role, a tool message without tool_call_id, a schema that is not
// JSON and a sampling parameter that is not a number.
//
// A message with [llm.Message.Parts] is sent with an array of content
// parts (see appendPart): a user message's text, image_url, input_audio
// and file parts; text parts only in system, assistant and tool
// messages, where the chat API takes no media. A tool result's media
// (read_file on an image or a PDF) is therefore sent as one user message
// right after the run of tool messages it belongs to, each tool's media
// introduced by a text part naming its call; the tool message itself
// keeps its text, or says that its result is the media that follows.
// Messages without parts are written as before, byte for byte.
//
// The body is written here rather than by the SDK's encoder, which walks
// its parameter types by reflection: 10× the time and 500× the
// allocations for a 20-turn conversation (backend/openai's
// BenchmarkRequestBody), and 15 % of bench agentic's CPU.
// TestRequestMatchesSDK and FuzzRequestMatchesSDK hold the two
// encodings equal as JSON values.
func AppendRequest(b []byte, req *llm.Request, o RequestOptions) ([]byte, error) {
	if req == nil {
		return b, errors.New("nil request")
	}
	b = append(b, '{')
	if o.Model != "" { // else the server's default
		b = jsonenc.AppendString(append(b, `"model":`...), o.Model, false)
		b = append(b, ',')
	}
	b = append(b, `"messages":[`...)
	toolMedia := false // the current run of tool messages holds media
	for i := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendMessage(b, &req.Messages[i]); err != nil {
			return b, fmt.Errorf("message %d: %v", i, err)
		}
		if req.Messages[i].Role == llm.RoleTool && hasMedia(&req.Messages[i]) {
			toolMedia = true
		}
		if toolMedia && (i+1 == len(req.Messages) || req.Messages[i+1].Role != llm.RoleTool) {
			// The end of a run of tool messages, one of which holds media.
			run := i
			for run > 0 && req.Messages[run-1].Role == llm.RoleTool {
				run--
			}
			if b, err = appendToolMedia(b, req.Messages[run:i+1], run); err != nil {
				return b, err
			}
			toolMedia = false
		}
	}
	b = append(b, ']')
	var err error
	if b, err = appendTools(b, req.Tools); err != nil {
		return b, err
	}
	if out := req.Output; out != nil {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
		b = jsonenc.AppendString(b, SchemaName(out.Name), false)
		b = append(b, `,"strict":false,"schema":`...)
		if b, err = jsonenc.AppendRaw(b, out.Schema, false); err != nil || len(out.Schema) == 0 {
			return b, errors.New("output schema is not valid JSON")
		}
		b = append(b, "}}"...)
	}
	if b, err = appendSampling(b, req, o.MaxCompletionTokens); err != nil {
		return b, err
	}
	if b, err = appendExtra(b, req.Extra); err != nil {
		return b, err
	}
	if o.Stream {
		// Servers that ignore stream_options simply send no usage chunk.
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}'), nil
}

// RequestSize estimates the bytes of req's body, so that the body is
// allocated once.
func RequestSize(req *llm.Request) int {
	n := 256
	for i := range req.Messages {
		n += len(req.Messages[i].Content) + 64
		for _, p := range req.Messages[i].Parts {
			n += len(p.Text) + len(p.URL) + base64.StdEncoding.EncodedLen(len(p.Data)) +
				len(p.MediaType) + len(p.FileID) + len(p.Filename) + 64
		}
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
	for k, v := range req.Extra {
		n += len(k) + len(v) + 4
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
		if len(msg.Parts) > 0 {
			var err error
			if b, err = appendParts(b, msg); err != nil {
				return b, err
			}
			return append(b, '}'), nil
		}
		return append(jsonenc.AppendString(b, msg.Content, false), '}'), nil
	case llm.RoleTool:
		if msg.ToolCallID == "" {
			return b, fmt.Errorf("tool message without tool_call_id")
		}
		b = append(b, `{"role":"tool","content":`...)
		if len(msg.Parts) > 0 {
			b = appendToolContent(b, msg)
		} else {
			b = jsonenc.AppendString(b, msg.Content, false)
		}
		b = jsonenc.AppendString(append(b, `,"tool_call_id":`...), msg.ToolCallID, false)
		return append(b, '}'), nil
	case llm.RoleAssistant:
		b = append(b, `{"role":"assistant"`...)
		if len(msg.Parts) > 0 {
			var err error
			if b, err = appendParts(append(b, `,"content":`...), msg); err != nil {
				return b, err
			}
		} else if msg.Content != "" || len(msg.ToolCalls) == 0 {
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
func appendTools(b []byte, tools []llm.ToolDef) ([]byte, error) {
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
				return b, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
			}
		}
		b = append(b, "}}"...)
	}
	return append(b, ']'), nil
}

// appendSampling appends the token cap (named max_completion_tokens when
// v2 is set) and the sampling parameters req sets.
func appendSampling(b []byte, req *llm.Request, v2 bool) ([]byte, error) {
	if req.MaxTokens > 0 {
		name := `,"max_tokens":`
		if v2 {
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
			return b, fmt.Errorf("%s %v is not a number JSON can carry", strings.Trim(f.name, `,":`), *f.v)
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

// SchemaName returns name as OpenAI accepts it: 1 to 64 characters of
// [a-zA-Z0-9_-], others replaced by '_'; "output" when empty.
func SchemaName(name string) string {
	if name == "" {
		return DefaultOutputName
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
