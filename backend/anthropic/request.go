package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/batchagent/batchagent/llm"
)

// wrapKey is the property that carries a structured answer whose schema is
// not an object: a tool's input must be an object.
const wrapKey = "value"

// call is one request translated for the SDK, with what reading its answer
// needs to know.
type call struct {
	params sdk.MessageNewParams
	// output names the structured-output tool; empty when the request
	// asks for no structured output.
	output string
	// wrapped says the answer is the wrapKey property of the tool's input.
	wrapped bool
	// files says a document refers to an uploaded file by id, which needs
	// the Files API beta named on the request.
	files bool
}

// translate maps req onto the Messages API. It fails, with an
// *llm.APIError wrapping llm.ErrBadRequest, on a schema that is not JSON
// and on a content part the API cannot take (audio, an image type it
// lacks, a data: URL that does not decode).
func (m *Model) translate(req *llm.Request) (*call, error) {
	c := &call{params: sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
	}}
	if c.params.Model == "" {
		c.params.Model = sdk.Model(m.model)
	}
	if c.params.MaxTokens <= 0 {
		c.params.MaxTokens = int64(m.maxTokens)
	}
	if req.Temperature != nil {
		c.params.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.TopP != nil {
		c.params.TopP = param.NewOpt(*req.TopP)
	}
	// req.Seed has no counterpart in the Messages API.
	if len(req.Stop) > 0 {
		c.params.StopSequences = req.Stop
	}
	var err error
	c.params.System, c.params.Messages, c.files, err = conversation(req.Messages)
	if err != nil {
		return nil, badRequest(err.Error())
	}

	for _, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tool %q: %v", t.Name, err))
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		c.params.Tools = append(c.params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	if req.Output != nil {
		name := req.Output.ToolName(req.Tools, maxToolName)
		schema, wrapped, err := outputSchema(req.Output.Schema)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("output schema: %v", err))
		}
		tp := sdk.ToolParam{
			Name:        name,
			Description: param.NewOpt("Give the final answer. Its input is the answer."),
			InputSchema: schema,
		}
		// Without tools the output tool is the only move; with tools the
		// model must call one of them or answer through the output tool
		// (the backend never asks for extended thinking, which would
		// forbid both choices).
		c.params.ToolChoice = sdk.ToolChoiceParamOfTool(name)
		if len(req.Tools) > 0 {
			tp.Description = param.NewOpt("Give the final answer, once no other tool is needed. Its input is the answer.")
			c.params.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
		}
		c.params.Tools = append(c.params.Tools, sdk.ToolUnionParam{OfTool: &tp})
		c.output, c.wrapped = name, wrapped
	}
	if err := translateExtra(c, req.Extra); err != nil {
		return nil, err
	}
	// The shared prefix is tools, then system: mark the end of each.
	if n := len(c.params.Tools); n > 0 {
		c.params.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	if n := len(c.params.System); n > 0 {
		c.params.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return c, nil
}

// conversation splits messages into system blocks and turns. Consecutive
// messages that map to the same role share one turn, so the tool results
// answering one assistant turn form a single user turn. Empty text is left
// out: the API refuses empty text blocks. files says a document refers to
// an uploaded file. The error names the message whose part the API cannot
// take.
func conversation(msgs []llm.Message) (system []sdk.TextBlockParam, turns []sdk.MessageParam, files bool, err error) {
	add := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			return
		}
		turns = append(turns, sdk.MessageParam{Role: role, Content: blocks})
	}
	for i, msg := range msgs {
		switch msg.Role {
		case llm.RoleSystem:
			if msg.Content != "" {
				system = append(system, sdk.TextBlockParam{Text: msg.Content})
			}
		case llm.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{
					ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments),
				}})
			}
			add(sdk.MessageParamRoleAssistant, blocks...)
		case llm.RoleTool:
			res := sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
			if msg.Content != "" {
				res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: msg.Content}}}
			}
			if len(msg.Parts) > 0 {
				content, f, err := toolResultContent(msg.Parts)
				if err != nil {
					return nil, nil, false, fmt.Errorf("message %d (tool result): %w", i, err)
				}
				res.Content = append(res.Content, content...)
				files = files || f
			}
			if msg.IsError {
				res.IsError = param.NewOpt(true)
			}
			add(sdk.MessageParamRoleUser, sdk.ContentBlockParamUnion{OfToolResult: &res})
		default: // user, and any role the API lacks
			if msg.Content != "" {
				add(sdk.MessageParamRoleUser, sdk.NewTextBlock(msg.Content))
			}
			if len(msg.Parts) > 0 {
				blocks, f, err := partBlocks(msg.Parts)
				if err != nil {
					return nil, nil, false, fmt.Errorf("message %d: %w", i, err)
				}
				add(sdk.MessageParamRoleUser, blocks...)
				files = files || f
			}
		}
	}
	return system, turns, files, nil
}

// toolInput returns a tool call's arguments as the object a tool_use block
// needs. Arguments that are not a JSON object (a model may write malformed
// ones) are sent as {}: the tool's error result tells the model the rest.
func toolInput(args json.RawMessage) json.RawMessage {
	if isObject(args) {
		return args
	}
	return json.RawMessage("{}")
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// inputSchema returns a tool's JSON Schema as the SDK sends it: every
// keyword kept, "type" set to "object", keys sorted so that the bytes, and
// with them Anthropic's prompt cache, are the same on every call. An empty
// schema is an object with no properties.
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return sdk.ToolInputSchemaParam{}, fmt.Errorf("schema is not a JSON object")
		}
	}
	fields["type"] = json.RawMessage(`"object"`)
	b, err := json.Marshal(fields)
	if err != nil {
		return sdk.ToolInputSchemaParam{}, err
	}
	return param.Override[sdk.ToolInputSchemaParam](json.RawMessage(b)), nil
}

// maxToolName is the longest tool name the Messages API accepts.
const maxToolName = 64

// outputSchema returns the input schema of the structured-output tool. A
// schema that does not describe an object is wrapped as the one required
// property wrapKey, since a tool's input is always an object.
func outputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, bool, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if !json.Valid(raw) {
		return sdk.ToolInputSchemaParam{}, false, fmt.Errorf("schema is not JSON")
	}
	var probe struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(raw, &probe); err == nil && string(probe.Type) == `"object"` {
		s, err := inputSchema(raw)
		return s, false, err
	}
	wrapper, err := json.Marshal(map[string]any{
		"properties": map[string]json.RawMessage{wrapKey: raw},
		"required":   []string{wrapKey},
	})
	if err != nil {
		return sdk.ToolInputSchemaParam{}, false, err
	}
	s, err := inputSchema(wrapper)
	return s, true, err
}

// outputText returns the structured answer carried by the input of the
// output tool: compact JSON, unwrapped when the schema was wrapped. Input
// that is not JSON is returned as it came, for the caller's validation to
// report.
func outputText(input []byte, wrapped bool) string {
	if wrapped {
		var w map[string]json.RawMessage
		if err := json.Unmarshal(input, &w); err == nil {
			if v, ok := w[wrapKey]; ok {
				input = v
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, input); err != nil {
		return string(bytes.TrimSpace(input))
	}
	return buf.String()
}

// badRequest is a request that cannot be sent.
func badRequest(msg string) *llm.APIError {
	return &llm.APIError{Backend: backendName, Message: msg, Err: llm.ErrBadRequest}
}

// extraFields are the extra request fields (llm.Request.Extra) the
// Messages API has a counterpart for.
const extraFields = "parallel_tool_calls top_k user"

// translateExtra maps a request's extra fields onto c: top_k to top_k,
// parallel_tool_calls false to the tool choice's
// disable_parallel_tool_use, user to metadata.user_id. Any other field
// is refused, naming it: none is dropped.
func translateExtra(c *call, extra map[string]json.RawMessage) error {
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		raw := extra[name]
		switch name {
		case "top_k":
			var k int64
			if err := json.Unmarshal(raw, &k); err != nil || k < 0 {
				return badRequest("top_k must be a non-negative integer")
			}
			c.params.TopK = param.NewOpt(k)
		case "parallel_tool_calls":
			var parallel bool
			if err := json.Unmarshal(raw, &parallel); err != nil {
				return badRequest("parallel_tool_calls must be true or false")
			}
			if parallel {
				continue // the API's default
			}
			switch tc := &c.params.ToolChoice; {
			case tc.OfAny != nil:
				tc.OfAny.DisableParallelToolUse = param.NewOpt(true)
			case tc.OfTool != nil:
				tc.OfTool.DisableParallelToolUse = param.NewOpt(true)
			case len(c.params.Tools) > 0:
				tc.OfAuto = &sdk.ToolChoiceAutoParam{DisableParallelToolUse: param.NewOpt(true)}
			}
		case "user":
			var user string
			if err := json.Unmarshal(raw, &user); err != nil {
				return badRequest("user must be a string")
			}
			c.params.Metadata.UserID = param.NewOpt(user)
		default:
			return badRequest(fmt.Sprintf("the request field %q has no counterpart in the Anthropic Messages API", name))
		}
	}
	return nil
}
