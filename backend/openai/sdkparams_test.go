package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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
	var toolMedia []oa.ChatCompletionContentPartUnionParam // of the current run of tool messages
	for i, msg := range req.Messages {
		mp, err := m.message(msg)
		if err != nil {
			return nil, m.errorf(0, llm.ErrBadRequest, "message %d: %v", i, err)
		}
		p.Messages = append(p.Messages, mp)
		if msg.Role == llm.RoleTool {
			if toolMedia, err = appendToolMedia(toolMedia, msg); err != nil {
				return nil, m.errorf(0, llm.ErrBadRequest, "message %d: %v", i, err)
			}
		}
		if len(toolMedia) > 0 && (i+1 == len(req.Messages) || req.Messages[i+1].Role != llm.RoleTool) {
			p.Messages = append(p.Messages, oa.UserMessage(toolMedia))
			toolMedia = nil
		}
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
	if len(msg.Parts) > 0 {
		return m.partsMessage(msg)
	}
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

// partsMessage is message for a message with parts.
func (m *Model) partsMessage(msg llm.Message) (oa.ChatCompletionMessageParamUnion, error) {
	var text []oa.ChatCompletionContentPartTextParam // the text parts, Content first
	if msg.Content != "" {
		text = append(text, oa.ChatCompletionContentPartTextParam{Text: msg.Content})
	}
	for i, p := range msg.Parts {
		switch {
		case p.Kind == llm.PartText:
			text = append(text, oa.ChatCompletionContentPartTextParam{Text: p.Text})
		case msg.Role != llm.RoleUser && msg.Role != llm.RoleTool:
			return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("part %d: a %s message takes only text parts, not %s", i, msg.Role, p.Kind)
		}
	}
	switch msg.Role {
	case llm.RoleSystem:
		return oa.SystemMessage(text), nil
	case llm.RoleUser:
		var parts []oa.ChatCompletionContentPartUnionParam
		if msg.Content != "" {
			parts = append(parts, oa.TextContentPart(msg.Content))
		}
		for i, p := range msg.Parts {
			part, err := sdkPart(p)
			if err != nil {
				return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("part %d: %v", i, err)
			}
			parts = append(parts, part)
		}
		return oa.UserMessage(parts), nil
	case llm.RoleTool:
		if msg.ToolCallID == "" {
			return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message without tool_call_id")
		}
		if len(text) == 0 {
			return oa.ToolMessage("(The result is the media in the next message.)", msg.ToolCallID), nil
		}
		return oa.ToolMessage(text, msg.ToolCallID), nil
	case llm.RoleAssistant:
		var a oa.ChatCompletionAssistantMessageParam
		for _, t := range text {
			a.Content.OfArrayOfContentParts = append(a.Content.OfArrayOfContentParts,
				oa.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{OfText: &t})
		}
		if a.Content.OfArrayOfContentParts == nil {
			a.Content.OfArrayOfContentParts = []oa.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{}
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

// appendToolMedia appends to parts the media of tool message msg, after
// a text part naming its call: the user message sent after the tool run.
func appendToolMedia(parts []oa.ChatCompletionContentPartUnionParam, msg llm.Message) ([]oa.ChatCompletionContentPartUnionParam, error) {
	label := false
	for j, p := range msg.Parts {
		if p.Kind == llm.PartText {
			continue
		}
		if !label {
			name := "Media returned by tool call " + msg.ToolCallID
			if msg.Name != "" {
				name += " (" + msg.Name + ")"
			}
			parts = append(parts, oa.TextContentPart(name+":"))
			label = true
		}
		part, err := sdkPart(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %v", j, err)
		}
		parts = append(parts, part)
	}
	return parts, nil
}

// sdkPart is p as the SDK's content part.
func sdkPart(p llm.Part) (oa.ChatCompletionContentPartUnionParam, error) {
	var none oa.ChatCompletionContentPartUnionParam
	switch p.Kind {
	case llm.PartText:
		return oa.TextContentPart(p.Text), nil
	case llm.PartImage:
		if !slices.Contains([]string{"", "auto", "low", "high", "original"}, p.Detail) {
			return none, fmt.Errorf("image detail %q is none of auto, low, high, original", p.Detail)
		}
		img := oa.ChatCompletionContentPartImageImageURLParam{URL: p.URL, Detail: p.Detail}
		switch {
		case p.URL != "":
		case len(p.Data) > 0:
			if !strings.HasPrefix(p.MediaType, "image/") {
				return none, fmt.Errorf("image data has media type %q, not image/*", p.MediaType)
			}
			img.URL = "data:" + p.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
		default:
			return none, fmt.Errorf("image part has neither URL nor data")
		}
		return oa.ImageContentPart(img), nil
	case llm.PartAudio:
		mediaType, data := p.MediaType, base64.StdEncoding.EncodeToString(p.Data)
		switch {
		case p.URL != "":
			ok := len(p.URL) >= 5 && strings.EqualFold(p.URL[:5], "data:")
			head, payload, ok2 := strings.Cut(p.URL[min(5, len(p.URL)):], ",")
			head, ok3 := strings.CutSuffix(head, ";base64")
			if !ok || !ok2 || !ok3 || payload == "" {
				return none, fmt.Errorf("audio part by URL: the chat API takes audio only as data (Data, or a base64 data: URL)")
			}
			mediaType, _, _ = strings.Cut(head, ";")
			data = payload
		case len(p.Data) == 0:
			return none, fmt.Errorf("audio part has no data")
		}
		format := map[string]string{"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav",
			"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mpeg3": "mp3", "audio/x-mpeg-3": "mp3"}[strings.ToLower(mediaType)]
		if format == "" {
			return none, fmt.Errorf("audio media type %q: the chat API takes wav (audio/wav) or mp3 (audio/mpeg)", mediaType)
		}
		return oa.InputAudioContentPart(oa.ChatCompletionContentPartInputAudioInputAudioParam{Data: data, Format: format}), nil
	case llm.PartFile:
		var f oa.ChatCompletionContentPartFileFileParam
		name := p.Filename
		if name == "" {
			name = "document.pdf"
		}
		switch {
		case p.FileID != "":
			f.FileID = oa.String(p.FileID)
		case p.URL != "" && !(len(p.URL) >= 5 && strings.EqualFold(p.URL[:5], "data:")):
			return none, fmt.Errorf("file part by URL %q: the chat API takes documents as data or a file id, not by URL", p.URL)
		case p.URL != "":
			f.FileData, f.Filename = oa.String(p.URL), oa.String(name)
		case len(p.Data) > 0:
			mt := p.MediaType
			if mt == "" {
				mt = "application/pdf"
			}
			f.FileData = oa.String("data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(p.Data))
			f.Filename = oa.String(name)
		default:
			return none, fmt.Errorf("file part has no file id, URL or data")
		}
		return oa.FileContentPart(f), nil
	default:
		return none, fmt.Errorf("unknown content part kind %q", p.Kind)
	}
}
