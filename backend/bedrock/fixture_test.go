package bedrock_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/backendtest"
)

// This file is a fixture server speaking Bedrock's wire format: Converse
// answers JSON, ConverseStream answers an application/vnd.amazon.eventstream
// body of binary frames, and errors carry the X-Amzn-ErrorType header and a
// JSON {"message": ...} body.

// wireRequest is the JSON body of a Converse or ConverseStream request.
type wireRequest struct {
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
	System          []wireBlock `json:"system"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
			CachePoint *wireCachePoint `json:"cachePoint"`
		} `json:"tools"`
		ToolChoice json.RawMessage `json:"toolChoice"`
	} `json:"toolConfig"`
}

type wireCachePoint struct {
	Type string `json:"type"`
}

type wireBlock struct {
	Text       *string         `json:"text"`
	CachePoint *wireCachePoint `json:"cachePoint"`
	ToolUse    *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ToolResult *struct {
		ToolUseID string `json:"toolUseId"`
		Content   []struct {
			Text     string        `json:"text"`
			Image    *wireImage    `json:"image"`
			Document *wireDocument `json:"document"`
		} `json:"content"`
		Status string `json:"status"`
	} `json:"toolResult"`
	Image    *wireImage    `json:"image"`
	Document *wireDocument `json:"document"`
}

// wireImage is an image block: bytes are base64 in JSON, which
// encoding/json decodes into a []byte.
type wireImage struct {
	Format string `json:"format"`
	Source struct {
		Bytes []byte `json:"bytes"`
	} `json:"source"`
}

type wireDocument struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Source struct {
		Bytes []byte `json:"bytes"`
	} `json:"source"`
}

// mediaString renders an image or document block, its bytes by the
// fixture value they equal.
func mediaString(img *wireImage, doc *wireDocument) string {
	known := func(b []byte) string {
		switch {
		case bytes.Equal(b, backendtest.ImagePNG):
			return "ImagePNG"
		case bytes.Equal(b, backendtest.DocumentPDF):
			return "DocumentPDF"
		}
		return fmt.Sprintf("%d unknown bytes", len(b))
	}
	if img != nil {
		return "image:" + img.Format + ":" + known(img.Source.Bytes)
	}
	return "document:" + doc.Format + ":" + doc.Name + ":" + known(doc.Source.Bytes)
}

// blockString renders a content block for comparisons.
func blockString(b wireBlock) string {
	switch {
	case b.Text != nil:
		return "text:" + *b.Text
	case b.CachePoint != nil:
		return "cachePoint:" + b.CachePoint.Type
	case b.ToolUse != nil:
		return "toolUse:" + b.ToolUse.ToolUseID + ":" + b.ToolUse.Name + ":" + compact(b.ToolUse.Input)
	case b.Image != nil || b.Document != nil:
		return mediaString(b.Image, b.Document)
	case b.ToolResult != nil:
		var texts []string
		for _, c := range b.ToolResult.Content {
			if c.Image != nil || c.Document != nil {
				texts = append(texts, mediaString(c.Image, c.Document))
				continue
			}
			texts = append(texts, c.Text)
		}
		return "toolResult:" + b.ToolResult.ToolUseID + ":" + strings.Join(texts, "|") + ":" + b.ToolResult.Status
	}
	return "unknown"
}

func compact(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid:" + string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// fixture serves the conformance suite's scenarios.
func fixture(t *testing.T, s backendtest.Scenario, stream bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checkRequest(t, s, stream, r)
		if backendtest.IsMedia(s) {
			s = backendtest.Plain // answered as plain; the request was checked
		}
		if status, code, msg := scenarioError(s); status != 0 {
			writeError(w, status, code, msg)
			return
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, converseBody(s))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		for _, fr := range streamFrames(t, s) {
			w.Write(fr)
		}
		f.Flush()
		switch s {
		case backendtest.StreamCut:
			// Drop the connection without the chunked terminator.
			panic(http.ErrAbortHandler)
		case backendtest.Cancel:
			<-r.Context().Done()
		}
	})
}

// scenarioError returns the HTTP error of an error scenario, or status 0.
func scenarioError(s backendtest.Scenario) (status int, code, msg string) {
	switch s {
	case backendtest.RateLimited:
		return http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again."
	case backendtest.Overloaded:
		return http.StatusServiceUnavailable, "ServiceUnavailableException", "Bedrock is unable to process your request."
	case backendtest.ServerError:
		return http.StatusInternalServerError, "InternalServerException", "The server encountered an internal error."
	case backendtest.BadRequest:
		return http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key [foo] is not permitted, please reformat your input and try again."
	case backendtest.ContextLength:
		return http.StatusBadRequest, "ValidationException", "Input is too long for requested model."
	case backendtest.Auth:
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	case backendtest.KeyEcho:
		return http.StatusBadRequest, "ValidationException", backendtest.KeyEchoMessage
	}
	return 0, "", ""
}

// writeError answers as Bedrock does for a failed call.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-RequestId", "fixture-request")
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "2")
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Write(b)
}

// converseBody is the Converse answer of s.
func converseBody(s backendtest.Scenario) string {
	const usage = `"usage":{"inputTokens":5,"outputTokens":5,"totalTokens":26,"cacheReadInputTokens":16,"cacheWriteInputTokens":0},"metrics":{"latencyMs":12}`
	message := func(content, stop string) string {
		return `{"output":{"message":{"role":"assistant","content":[` + content + `]}},"stopReason":"` + stop + `",` + usage + `}`
	}
	switch s {
	case backendtest.ToolCall:
		return message(`{"text":"Let me look."},`+
			`{"toolUse":{"toolUseId":"call_1","name":"read_file","input":{"path":"a.go"}}},`+
			`{"toolUse":{"toolUseId":"call_2","name":"lookup","input":{"id":7}}}`, "tool_use")
	case backendtest.ToolResult:
		return message(`{"text":"Done."}`, "end_turn")
	case backendtest.Structured:
		return message(`{"toolUse":{"toolUseId":"tooluse_1","name":"answer","input":{"n":3}}}`, "tool_use")
	case backendtest.Malformed:
		return `{"output":{"message":{"role":"assistant","content":[{"text":"Hel`
	}
	return message(`{"text":"Hello from the fixture."}`, "end_turn")
}

// frame encodes one event-stream event with the SDK's encoder.
func frame(t testing.TB, eventType, payload string) []byte {
	t.Helper()
	return backendtest.EventFrame(eventType, payload)
}

// exceptionFrame encodes an exception event, as Bedrock reports a failure
// in the middle of a stream.
func exceptionFrame(t testing.TB, exceptionType, msg string) []byte {
	t.Helper()
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Headers.Set(":exception-type", eventstream.StringValue(exceptionType))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload, _ = json.Marshal(map[string]string{"message": msg})
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, m); err != nil {
		t.Fatalf("encode %s exception: %v", exceptionType, err)
	}
	return buf.Bytes()
}

// textDelta is a contentBlockDelta event of text.
func textDelta(t testing.TB, block int, text string) []byte {
	b, _ := json.Marshal(text)
	return frame(t, "contentBlockDelta", `{"contentBlockIndex":`+itoa(block)+`,"delta":{"text":`+string(b)+`},"p":"abcd"}`)
}

// toolStart is a contentBlockStart event of a tool use.
func toolStart(t testing.TB, block int, id, name string) []byte {
	return frame(t, "contentBlockStart", `{"contentBlockIndex":`+itoa(block)+`,"start":{"toolUse":{"toolUseId":"`+id+`","name":"`+name+`"}},"p":"abcd"}`)
}

// toolDelta is a contentBlockDelta event of a fragment of a tool's input.
func toolDelta(t testing.TB, block int, input string) []byte {
	b, _ := json.Marshal(input)
	return frame(t, "contentBlockDelta", `{"contentBlockIndex":`+itoa(block)+`,"delta":{"toolUse":{"input":`+string(b)+`}},"p":"abcd"}`)
}

func blockStop(t testing.TB, block int) []byte {
	return frame(t, "contentBlockStop", `{"contentBlockIndex":`+itoa(block)+`,"p":"abcd"}`)
}

func messageStart(t testing.TB) []byte {
	return frame(t, "messageStart", `{"role":"assistant","p":"abcd"}`)
}

func messageStop(t testing.TB, reason string) []byte {
	return frame(t, "messageStop", `{"stopReason":"`+reason+`","p":"abcd"}`)
}

func metadata(t testing.TB) []byte {
	return frame(t, "metadata", `{"usage":{"inputTokens":5,"outputTokens":5,"totalTokens":26,"cacheReadInputTokens":16,"cacheWriteInputTokens":0},"metrics":{"latencyMs":12},"p":"abcd"}`)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// streamFrames are the ConverseStream events of s.
func streamFrames(t testing.TB, s backendtest.Scenario) [][]byte {
	switch s {
	case backendtest.ToolCall:
		return [][]byte{
			messageStart(t),
			textDelta(t, 0, "Let me look."), blockStop(t, 0),
			toolStart(t, 1, "call_1", "read_file"), toolDelta(t, 1, `{"path":`), toolDelta(t, 1, ` "a.go"}`), blockStop(t, 1),
			toolStart(t, 2, "call_2", "lookup"), toolDelta(t, 2, `{"id"`), toolDelta(t, 2, `:7}`), blockStop(t, 2),
			messageStop(t, "tool_use"), metadata(t),
		}
	case backendtest.ToolResult:
		return [][]byte{messageStart(t), textDelta(t, 0, "Done."), blockStop(t, 0), messageStop(t, "end_turn"), metadata(t)}
	case backendtest.Structured:
		return [][]byte{
			messageStart(t),
			toolStart(t, 0, "tooluse_1", "answer"), toolDelta(t, 0, `{"n": `), toolDelta(t, 0, `3}`), blockStop(t, 0),
			messageStop(t, "tool_use"), metadata(t),
		}
	case backendtest.StreamCut, backendtest.Cancel:
		return [][]byte{messageStart(t), textDelta(t, 0, "Hello ")}
	case backendtest.Malformed:
		return [][]byte{messageStart(t), frame(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel`)}
	}
	return [][]byte{
		messageStart(t),
		textDelta(t, 0, "Hello "), textDelta(t, 0, "from the fixture."), blockStop(t, 0),
		messageStop(t, "end_turn"), metadata(t),
	}
}

// checkRequest reports, with t.Errorf, what differs from the request the
// suite sends for s.
func checkRequest(t *testing.T, s backendtest.Scenario, stream bool, r *http.Request) {
	op := "converse"
	if stream {
		op = "converse-stream"
	}
	if want := "/model/" + backendtest.ModelName + "/" + op; r.Method != http.MethodPost || r.URL.Path != want {
		t.Errorf("%s: request %s %s, want POST %s", s, r.Method, r.URL.Path, want)
	}
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+accessKeyID+"/") || !strings.Contains(auth, "/us-east-1/bedrock/aws4_request") {
		t.Errorf("%s: Authorization %q, want a SigV4 signature by %s for bedrock in us-east-1", s, auth, accessKeyID)
	}
	if strings.Contains(r.Header.Get("Authorization"), backendtest.APIKey) {
		t.Errorf("%s: the Authorization header carries the secret key", s)
	}
	var req wireRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		t.Errorf("%s: decode request body: %v", s, err)
		return
	}
	if req.InferenceConfig.MaxTokens != backendtest.MaxTokens {
		t.Errorf("%s: maxTokens %d, want %d", s, req.InferenceConfig.MaxTokens, backendtest.MaxTokens)
	}
	var system []string
	for _, b := range req.System {
		system = append(system, blockString(b))
	}
	if diff := cmp.Diff([]string{"text:" + backendtest.SystemText, "cachePoint:default"}, system); diff != "" {
		t.Errorf("%s: system blocks (-want +got):\n%s", s, diff)
	}
	var messages []string
	for _, m := range req.Messages {
		for _, b := range m.Content {
			messages = append(messages, m.Role+" "+blockString(b))
		}
	}
	want := []string{"user text:" + backendtest.UserText}
	switch s {
	case backendtest.ToolResult, backendtest.MediaToolImage:
		result := backendtest.ToolResultText
		if s == backendtest.MediaToolImage {
			result += "|image:png:ImagePNG"
		}
		want = []string{
			"user text:Read a.go.",
			`assistant toolUse:call_1:read_file:{"path":"a.go"}`,
			"user toolResult:call_1:" + result + ":",
		}
	case backendtest.MediaImage, backendtest.MediaImageDataURL:
		want = []string{"user text:" + backendtest.MediaText, "user image:png:ImagePNG"}
	case backendtest.MediaFile:
		want = []string{"user text:" + backendtest.MediaText, "user document:pdf:invoice 2026:DocumentPDF"}
	}
	if diff := cmp.Diff(want, messages); diff != "" {
		t.Errorf("%s: messages (-want +got):\n%s", s, diff)
	}
	if len(req.Messages) != 1 && len(req.Messages) != 3 {
		t.Errorf("%s: %d messages, want roles to alternate", s, len(req.Messages))
	}

	var tools []string
	var choice string
	if tc := req.ToolConfig; tc != nil {
		for _, tool := range tc.Tools {
			switch {
			case tool.ToolSpec != nil:
				tools = append(tools, tool.ToolSpec.Name+" "+compact(tool.ToolSpec.InputSchema.JSON))
			case tool.CachePoint != nil:
				tools = append(tools, "cachePoint:"+tool.CachePoint.Type)
			}
		}
		if len(tc.ToolChoice) > 0 {
			choice = compact(tc.ToolChoice)
		}
	}
	var wantTools []string
	wantChoice := ""
	switch s {
	case backendtest.ToolCall, backendtest.ToolResult, backendtest.MediaToolImage:
		for _, d := range backendtest.ToolDefs {
			wantTools = append(wantTools, d.Name+" "+compact(d.Parameters))
		}
		wantTools = append(wantTools, "cachePoint:default")
	case backendtest.Structured:
		wantTools = []string{backendtest.OutputSpec.Name + " " + compact(backendtest.OutputSpec.Schema), "cachePoint:default"}
		wantChoice = `{"tool":{"name":"` + backendtest.OutputSpec.Name + `"}}`
	}
	if diff := cmp.Diff(wantTools, tools); diff != "" {
		t.Errorf("%s: tools (-want +got):\n%s", s, diff)
	}
	if choice != wantChoice {
		t.Errorf("%s: toolChoice %s, want %q", s, choice, wantChoice)
	}
}
