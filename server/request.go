package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// llmRequest turns cr into the model request of a passthrough. It
// returns an *apiError (400) naming the field at fault.
func llmRequest(cr *oaiwire.Request) (*llm.Request, *apiError) {
	if len(cr.Messages) == 0 {
		return nil, badParam("messages", "messages must be a non-empty array")
	}
	if cr.N != nil && *cr.N != 1 {
		return nil, badParam("n", "only n=1 is supported")
	}
	req := &llm.Request{Temperature: cr.Temperature, TopP: cr.TopP, Seed: cr.Seed}
	msgs, fault := cr.LLMMessages((*oaiwire.Message).Text)
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
		return badParam(fmt.Sprintf("messages[%d].content", i), f.Err.Error())
	case oaiwire.FaultToolName:
		return badParam(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, f.Call), "a tool call needs a function name")
	case oaiwire.FaultToolCallID:
		return badParam(fmt.Sprintf("messages[%d].tool_call_id", i), "a tool message needs tool_call_id")
	default:
		return badParam(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("unknown role %q (want system, developer, user, assistant or tool)", f.Role))
	}
}
