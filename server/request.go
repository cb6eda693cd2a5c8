package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// maxN is the most choices a request may ask for (n).
const maxN = 128

// choicesOf returns the number of choices cr asks for: its n, 1 when
// unset.
func choicesOf(cr *oaiwire.Request) int {
	if cr.N == nil {
		return 1
	}
	return *cr.N
}

// llmRequest turns cr into the model request of a passthrough. It
// returns an *apiError (400) naming the field at fault.
func llmRequest(cr *oaiwire.Request) (*llm.Request, *apiError) {
	if len(cr.Messages) == 0 {
		return nil, badParam("messages", "messages must be a non-empty array")
	}
	if cr.N != nil && (*cr.N < 1 || *cr.N > maxN) {
		return nil, badParam("n", fmt.Sprintf("n must be an integer from 1 to %d, not %d", maxN, *cr.N))
	}
	req := &llm.Request{Temperature: cr.Temperature, TopP: cr.TopP, Seed: cr.Seed, Extra: cr.Extra}
	msgs, fault := cr.LLMMessagesWithMedia()
	if fault != nil {
		return nil, messageError(fault)
	}
	req.Messages = msgs
	tools, bad := cr.LLMTools()
	if bad >= 0 {
		return nil, badParam(fmt.Sprintf("tools[%d]", bad), "a tool must be of type function and have a name")
	}
	// tool_choice "none" withholds the tools; "auto", "required" and a
	// named function pass them on as they are (llm.Request has no choice).
	if !bytes.Equal(bytes.TrimSpace(cr.ToolChoice), []byte(`"none"`)) {
		req.Tools = tools
	}
	if rf := cr.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			req.Output = &llm.OutputSpec{Name: "json_object", Schema: json.RawMessage(`{"type":"object"}`)}
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, badParam("response_format.json_schema", "json_schema needs a schema")
			}
			req.Output = &llm.OutputSpec{Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema}
		default:
			return nil, badParam("response_format.type", fmt.Sprintf("unknown response format %q (want text, json_object or json_schema)", rf.Type))
		}
	}
	switch {
	case cr.MaxCompletionTokens != nil:
		req.MaxTokens = *cr.MaxCompletionTokens
	case cr.MaxTokens != nil:
		req.MaxTokens = *cr.MaxTokens
	}
	if req.MaxTokens < 0 {
		return nil, badParam("max_tokens", "max_tokens must be positive")
	}
	if stop := bytes.TrimSpace(cr.Stop); len(stop) > 0 && !bytes.Equal(stop, []byte("null")) {
		var one string
		if json.Unmarshal(stop, &one) == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(stop, &req.Stop); err != nil {
			return nil, badParam("stop", "stop must be a string or an array of strings")
		}
	}
	return req, nil
}

// messageError is the answer to a message that the gateway refuses.
func messageError(f *oaiwire.MessageError) *apiError {
	i := f.Message
	switch f.Fault {
	case oaiwire.FaultContent:
		return contentError(i, f.Err)
	case oaiwire.FaultToolName:
		return badParam(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, f.Call), "a tool call needs a function name")
	case oaiwire.FaultToolCallID:
		return badParam(fmt.Sprintf("messages[%d].tool_call_id", i), "a tool message needs tool_call_id")
	default:
		return badParam(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("unknown role %q (want system, developer, user, assistant or tool)", f.Role))
	}
}

// contentError is the answer to message i's content that cannot be read:
// its param names the content part and field at fault.
func contentError(i int, err error) *apiError {
	param := fmt.Sprintf("messages[%d].content", i)
	if pe, ok := errors.AsType[*oaiwire.PartError](err); ok {
		param = fmt.Sprintf("%s[%d]", param, pe.Part)
		if pe.Field != "" {
			param += "." + pe.Field
		}
		return badParam(param, fmt.Sprintf("%s: %v", param, pe.Err))
	}
	return badParam(param, err.Error())
}

// mediaRefused returns the answer to msgs when model, whose backend
// takes media as m says, cannot take one of their parts; nil when it
// can take them all. name is the model the client asked for.
func mediaRefused(name string, model llm.Model, msgs []llm.Message) *apiError {
	var m llm.Media
	if c, ok := model.(llm.Capable); ok {
		m = c.Capabilities().Media
	}
	for i, msg := range msgs {
		for j, p := range msg.Parts {
			if err := m.Accepts(p); err != nil {
				param := fmt.Sprintf("messages[%d].content[%d]", i, j)
				return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_content", param: param,
					message: fmt.Sprintf("the model %q cannot take %s (its %s part): %v", name, param, p.Kind, err)}
			}
		}
	}
	return nil
}

// extraRefused returns the answer to a request whose extra fields (those
// the gateway does not read) the model, whose backend does with them
// what x says, cannot send on: 400 naming the first such field, in name
// order; nil when it sends them all on, verbatim or translated. name is
// the model the client asked for.
func extraRefused(name string, x llm.ExtraFields, extra map[string]json.RawMessage) *apiError {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if !x.Accepts(k) {
			return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "unsupported_parameter", param: k,
				message: fmt.Sprintf("the model %q does not support the parameter %q: its backend has no counterpart for it", name, k)}
		}
	}
	return nil
}
