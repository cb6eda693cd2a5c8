package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"

	"github.com/batchagent/batchagent/llm"
)

const (
	backendName = "bedrock"
	// emptyToolResult stands in for a tool result with no text: Bedrock
	// rejects blank text blocks.
	emptyToolResult = "(no output)"
)

// params are the parts of a Converse or ConverseStream input.
type params struct {
	modelID    string
	messages   []types.Message
	system     []types.SystemContentBlock
	toolConfig *types.ToolConfiguration
	inference  *types.InferenceConfiguration
	// output names the output tool, or is empty.
	output string
}

// buildParams maps req to Converse's shapes. It returns an *llm.APIError
// wrapping llm.ErrBadRequest for a request that cannot be sent: no model,
// a tool or output schema that is not JSON, or a content part Converse
// cannot take (audio, media by URL, a media type it lacks).
func (m *Model) buildParams(req *llm.Request) (*params, error) {
	p := &params{modelID: req.Model}
	if p.modelID == "" {
		p.modelID = m.model
	}
	if p.modelID == "" {
		return nil, badRequest("no model: set the request's model or Config.Model")
	}
	if len(req.Extra) > 0 {
		name := slices.Sorted(maps.Keys(req.Extra))[0]
		// Converse has no place for a field it does not name: refused,
		// never dropped.
		return nil, badRequest(fmt.Sprintf("the request field %q has no counterpart in the Bedrock Converse API", name))
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.maxTokens
	}
	p.inference = &types.InferenceConfiguration{MaxTokens: aws.Int32(int32(min(maxTokens, math.MaxInt32)))}
	if req.Temperature != nil {
		p.inference.Temperature = aws.Float32(float32(*req.Temperature))
	}
	if req.TopP != nil {
		p.inference.TopP = aws.Float32(float32(*req.TopP))
	}
	// req.Seed has no counterpart in the Converse API.
	if len(req.Stop) > 0 {
		p.inference.StopSequences = req.Stop
	}

	var names docNames
	for i, msg := range req.Messages {
		if msg.Role == llm.RoleSystem {
			if msg.Content != "" {
				p.system = append(p.system, &types.SystemContentBlockMemberText{Value: msg.Content})
			}
			continue
		}
		role, blocks, err := contentBlocks(msg, &names)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("message %d: %v", i, err))
		}
		if len(blocks) == 0 {
			continue
		}
		// Bedrock wants roles to alternate: merge a turn into the previous
		// one of the same role (tool results, then a user's text).
		if n := len(p.messages); n > 0 && p.messages[n-1].Role == role {
			p.messages[n-1].Content = append(p.messages[n-1].Content, blocks...)
			continue
		}
		p.messages = append(p.messages, types.Message{Role: role, Content: blocks})
	}
	if len(p.system) > 0 && m.cachePoints {
		p.system = append(p.system, &types.SystemContentBlockMemberCachePoint{Value: cachePoint()})
	}

	tools := req.Tools
	if req.Output != nil {
		p.output = req.Output.ToolName(req.Tools, maxToolName)
		desc := "Give the final answer."
		if len(req.Tools) > 0 {
			desc = "Give the final answer, once no other tool is needed."
		}
		tools = append(slices.Clip(req.Tools), llm.ToolDef{Name: p.output, Description: desc, Parameters: req.Output.Schema})
	}
	if len(tools) > 0 {
		tc := &types.ToolConfiguration{}
		for _, t := range tools {
			schema := t.Parameters
			if len(bytes.TrimSpace(schema)) == 0 {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			doc, err := jsonDocument(schema)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("tool %q: parameters: %v", t.Name, err))
			}
			spec := types.ToolSpecification{Name: aws.String(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: doc}}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		if m.cachePoints {
			tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: cachePoint()})
		}
		switch {
		case p.output == "":
		case len(req.Tools) == 0:
			tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String(p.output)}}
		case choosesAny(p.modelID):
			// The model must call a tool: one of the request's, or the
			// output tool with the final answer.
			tc.ToolChoice = &types.ToolChoiceMemberAny{Value: types.AnyToolChoice{}}
		default:
			// Left out, toolChoice is auto: the model may also answer in
			// text, which the caller validates as the answer.
		}
		p.toolConfig = tc
	}
	return p, nil
}

// maxToolName is the longest tool name Converse accepts.
const maxToolName = 64

// anyToolModels are the model families that take toolChoice "any", as
// parts of a model ID: Bedrock refuses a toolChoice for the others
// (Llama, Cohere, AI21...).
var anyToolModels = []string{"anthropic.claude", "amazon.nova", "mistral.mistral-large"}

// choosesAny reports whether the model of modelID, a model ID or an
// inference profile's ID or ARN (which name the model), takes toolChoice
// "any". An ARN that does not name its model, such as a provisioned
// model's or an application inference profile's, is taken not to.
func choosesAny(modelID string) bool {
	return slices.ContainsFunc(anyToolModels, func(family string) bool { return strings.Contains(modelID, family) })
}

// contentBlocks maps a user, assistant or tool message to its role and
// content blocks. Blank text is left out: Bedrock rejects it. names holds
// the request's document names. The error says which part Converse cannot
// take.
func contentBlocks(msg llm.Message, names *docNames) (types.ConversationRole, []types.ContentBlock, error) {
	switch msg.Role {
	case llm.RoleTool:
		var content []types.ToolResultContentBlock
		if msg.Content != "" || len(msg.Parts) == 0 {
			text := msg.Content
			if text == "" {
				text = emptyToolResult
			}
			content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}}
		}
		if len(msg.Parts) > 0 {
			parts, err := toolResultContent(msg.Parts, names)
			if err != nil {
				return "", nil, fmt.Errorf("tool result: %w", err)
			}
			content = append(content, parts...)
			if len(content) == 0 {
				content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: emptyToolResult}}
			}
		}
		res := types.ToolResultBlock{
			ToolUseId: aws.String(msg.ToolCallID),
			Content:   content,
		}
		if msg.IsError {
			res.Status = types.ToolResultStatusError
		}
		return types.ConversationRoleUser, []types.ContentBlock{&types.ContentBlockMemberToolResult{Value: res}}, nil
	case llm.RoleAssistant:
		var blocks []types.ContentBlock
		if msg.Content != "" {
			blocks = append(blocks, &types.ContentBlockMemberText{Value: msg.Content})
		}
		for _, c := range msg.ToolCalls {
			blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
				ToolUseId: aws.String(c.ID),
				Name:      aws.String(c.Name),
				Input:     toolInput(c.Arguments),
			}})
		}
		return types.ConversationRoleAssistant, blocks, nil
	default:
		if len(msg.Parts) > 0 {
			blocks, err := partBlocks(msg.Parts, names)
			if err != nil {
				return "", nil, err
			}
			if msg.Content != "" {
				blocks = append([]types.ContentBlock{&types.ContentBlockMemberText{Value: msg.Content}}, blocks...)
			}
			return types.ConversationRoleUser, blocks, nil
		}
		if msg.Content == "" {
			return types.ConversationRoleUser, nil, nil
		}
		return types.ConversationRoleUser, []types.ContentBlock{&types.ContentBlockMemberText{Value: msg.Content}}, nil
	}
}

// toolInput returns a call's arguments as a document. Bedrock wants an
// object: arguments the model wrote malformed are replayed as {}.
func toolInput(args json.RawMessage) document.Interface {
	v, err := decodeJSON(args)
	if _, obj := v.(map[string]any); err != nil || !obj {
		v = map[string]any{}
	}
	return document.NewLazyDocument(v)
}

func cachePoint() types.CachePointBlock {
	return types.CachePointBlock{Type: types.CachePointTypeDefault}
}

// jsonDocument decodes one JSON value into a document.
func jsonDocument(raw json.RawMessage) (document.Interface, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return document.NewLazyDocument(v), nil
}

// decodeJSON decodes one JSON value into the form the SDK's document
// encoder writes back faithfully: it would write a json.RawMessage as an
// array of bytes and a json.Number as a string, so numbers become smithy
// document numbers, which keep their exact text.
func decodeJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return documentValue(v), nil
}

// documentValue replaces the json.Numbers of v, in place.
func documentValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		return smithydocument.Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = documentValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = documentValue(e)
		}
	}
	return v
}

// compactJSON returns b without insignificant space, or b unchanged when it
// is not valid JSON.
func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

func badRequest(msg string) error {
	return &llm.APIError{Backend: backendName, Message: msg, Err: llm.ErrBadRequest}
}
