package openai

import (
	"encoding/json"
	"fmt"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
)

// params maps req to the SDK's request parameters: how the backend built
// its requests before body, kept as the reference body must match
// (TestBodyMatchesSDK, FuzzBodyMatchesSDK). The SDK marshals them, and
// Stream's requests then had "stream":true set on top.
func (m *Model) params(req *llm.Request, stream bool) (*oa.ChatCompletionNewParams, error) {
	p := new(oa.ChatCompletionNewParams)
	if req == nil {
		return nil, m.errorf(0, llm.ErrBadRequest, "nil request")
	}
	p.Model = req.Model
	if p.Model == "" {
		p.Model = m.model
	}
	if p.Model == "" && m.maxTokensV2 {
		return nil, m.errorf(0, llm.ErrBadRequest, "no model: set Config.Model or Request.Model")
	}

	p.Messages = make([]oa.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, msg := range req.Messages {
		mp, err := m.message(msg)
		if err != nil {
			return nil, m.errorf(0, llm.ErrBadRequest, "message %d: %v", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}

	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = oa.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			if !json.Valid(t.Parameters) {
				return nil, m.errorf(0, llm.ErrBadRequest, "tool %q: parameters are not valid JSON", t.Name)
			}
			fd.SetExtraFields(map[string]any{"parameters": t.Parameters})
		}
		p.Tools = append(p.Tools, oa.ChatCompletionFunctionTool(fd))
	}

	if out := req.Output; out != nil {
		if !json.Valid(out.Schema) {
			return nil, m.errorf(0, llm.ErrBadRequest, "output schema is not valid JSON")
		}
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   oaiwire.SchemaName(out.Name),
				Strict: oa.Bool(false),
				Schema: out.Schema,
			},
		}
	}

	if req.MaxTokens > 0 {
		if m.maxTokensV2 {
			p.MaxCompletionTokens = oa.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = oa.Int(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		p.Temperature = oa.Float(*req.Temperature)
	}
	if req.TopP != nil {
		p.TopP = oa.Float(*req.TopP)
	}
	if req.Seed != nil {
		p.Seed = oa.Int(*req.Seed)
	}
	if len(req.Stop) > 0 {
		p.Stop.OfStringArray = req.Stop
	}
	if stream {
		// Servers that ignore it simply send no usage chunk.
		p.StreamOptions.IncludeUsage = oa.Bool(true)
	}
	return p, nil
}

func (m *Model) message(msg llm.Message) (oa.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case llm.RoleSystem:
		return oa.SystemMessage(msg.Content), nil
	case llm.RoleUser:
		return oa.UserMessage(msg.Content), nil
	case llm.RoleTool:
		if msg.ToolCallID == "" {
			return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message without tool_call_id")
		}
		return oa.ToolMessage(msg.Content, msg.ToolCallID), nil
	case llm.RoleAssistant:
		var a oa.ChatCompletionAssistantMessageParam
		if msg.Content != "" || len(msg.ToolCalls) == 0 {
			a.Content.OfString = oa.String(msg.Content)
		}
		for _, c := range msg.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
				},
			})
		}
		return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", msg.Role)
	}
}
