package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
)

// eyes is an llm.Model that takes images (bytes and URLs) and answers
// with what it was sent: the text of the last user message, then each of
// its images' type and size. It keeps every request it was sent.
type eyes struct {
	mu   sync.Mutex
	reqs []*llm.Request
}

func (m *eyes) Capabilities() llm.Capabilities {
	return llm.Capabilities{Media: llm.Media{Image: true, ImageURL: true}}
}

func (m *eyes) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	var b strings.Builder
	for i := len(req.Messages) - 1; i >= 0; i-- {
		msg := req.Messages[i]
		if msg.Role != llm.RoleUser {
			continue
		}
		b.WriteString(msg.Content)
		for _, p := range msg.Parts {
			switch p.Kind {
			case llm.PartText:
				b.WriteString(p.Text)
			case llm.PartImage:
				fmt.Fprintf(&b, " [%s %dx%d %d bytes]", p.MediaType, p.Width, p.Height, len(p.Data))
			}
		}
		break
	}
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: b.String()}, FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 5}}, nil
}

// requests returns the requests m was sent.
func (m *eyes) requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.reqs...)
}

// blind is an llm.Model that takes text only.
type blind struct{}

func (blind) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "text"}, FinishReason: llm.FinishStop}, nil
}

// photo returns a w×h PNG as a data: URL, and its bytes.
func photo(t *testing.T, w, h int) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), b.Bytes()
}

// imageParams asks model to classify the image at url.
func imageParams(model, url string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("Classify this photo."),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url, Detail: "low"}),
		})},
	}
}

// mediaGateway serves model "eyes" (takes images), "blind" (text only)
// and agents "tagger" on eyes and "reader" on blind.
func mediaGateway(t *testing.T, cfg server.Config) (*gateway, *eyes) {
	t.Helper()
	m := &eyes{}
	spec := func(model llm.Model) *batchagent.Spec {
		s, err := batchagent.NewSpec(batchagent.Def{Model: model, Task: "Tag this: {input}", Priority: batchagent.Interactive})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cfg.Backends = map[string]batchagent.Backend{"eyes": {Model: m, Name: "eyes-1"}, "blind": {Model: blind{}, Name: "blind-1"}}
	cfg.Agents = map[string]*batchagent.Spec{"tagger": spec(m), "reader": spec(blind{})}
	return newGateway(t, cfg), m
}

// TestPassthroughImage: the official client sends a data-URL image
// through the gateway; the backend gets it as an image part with its
// bytes, type, size and detail, and answers.
func TestPassthroughImage(t *testing.T) {
	g, m := mediaGateway(t, server.Config{})
	url, img := photo(t, 64, 48)
	resp, err := g.client("").Chat.Completions.New(t.Context(), imageParams("eyes", url))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Choices[0].Message.Content, "Classify this photo. [image/png 64x48 "+fmt.Sprint(len(img))+" bytes]"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	reqs := m.requests()
	if len(reqs) != 1 || reqs[0].Model != "eyes-1" {
		t.Fatalf("backend got %d requests", len(reqs))
	}
	parts := reqs[0].Messages[0].Parts
	if len(parts) != 2 || parts[0].Text != "Classify this photo." || parts[1].Kind != llm.PartImage ||
		!bytes.Equal(parts[1].Data, img) || parts[1].MediaType != "image/png" || parts[1].Detail != "low" || reqs[0].Messages[0].Content != "" {
		t.Errorf("backend's user message %+v", reqs[0].Messages[0])
	}

	// Streamed, the same.
	stream := g.client("").Chat.Completions.NewStreaming(t.Context(), imageParams("eyes", url))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || !strings.Contains(acc.Choices[0].Message.Content, "image/png 64x48") {
		t.Errorf("streamed: %q, %v", acc.Choices[0].Message.Content, err)
	}
}

// TestAgentImage: in agent mode the agent's task carries the request's
// image after its text: its first model call's user message holds both.
func TestAgentImage(t *testing.T) {
	g, m := mediaGateway(t, server.Config{})
	url, img := photo(t, 10, 20)
	resp, err := g.client("").Chat.Completions.New(t.Context(), imageParams("agent:tagger", url))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Tag this: Classify this photo. [image/png 10x20 "+fmt.Sprint(len(img))+" bytes]" {
		t.Errorf("agent's answer %q", got)
	}
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	first := reqs[0].Messages[0]
	if first.Role != llm.RoleUser || len(first.Parts) != 2 || first.Parts[0].Text != "Tag this: Classify this photo." || !bytes.Equal(first.Parts[1].Data, img) {
		t.Errorf("agent's first message %+v", first)
	}
}

// TestMediaRefused: a model (or an agent's model) that cannot take an
// image answers 400 naming the model and the part, before any call; a
// bad part is a 400 naming message, part and field.
func TestMediaRefused(t *testing.T) {
	g, m := mediaGateway(t, server.Config{})
	url, _ := photo(t, 4, 4)
	for _, tt := range []struct {
		name, model, url string
		code, param, msg string
	}{
		{"text-only backend", "blind", url, "unsupported_content", "messages[0].content[1]", `the model "blind" cannot take messages[0].content[1] (its image part): the backend takes no image parts as bytes`},
		{"text-only agent", "agent:reader", url, "unsupported_content", "messages", `the model "agent:reader" cannot take`},
		{"URL to a loopback address", "eyes", "http://127.0.0.1/a.png", "invalid_value", "messages[0].content[1].image_url.url", "neither an https URL nor a data: URL"},
		{"data URL not base64", "eyes", "data:image/png;base64,***", "invalid_value", "messages[0].content[1].image_url.url", "not base64"},
		{"declared type lies", "agent:tagger", strings.Replace(url, "image/png", "image/gif", 1), "invalid_value", "messages[0].content[1].image_url.url", "declared image/gif, but the data is image/png"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.client("").Chat.Completions.New(t.Context(), imageParams(tt.model, tt.url))
			ae := wantStatus(t, tt.name, err, http.StatusBadRequest, tt.code)
			if ae == nil {
				return
			}
			if ae.Param != tt.param || !strings.Contains(ae.Message, tt.msg) {
				t.Errorf("param %q, message %q; want %q and %q", ae.Param, ae.Message, tt.param, tt.msg)
			}
		})
	}
	if n := len(m.requests()); n != 0 {
		t.Errorf("the backend was called %d times", n)
	}
}

// TestBatchImages: a batch file whose lines carry data-URL images, for a
// model and for an agent, completes with every line answered.
func TestBatchImages(t *testing.T) {
	g, m := mediaGateway(t, server.Config{Batches: openStore(t, t.TempDir())})
	c := g.client("")
	const n = 12
	var in bytes.Buffer
	for i := range n {
		url, _ := photo(t, 8+i, 8)
		model := "eyes"
		if i%3 == 2 {
			model = "agent:tagger"
		}
		body, _ := json.Marshal(imageParams(model, url))
		fmt.Fprintf(&in, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, body)
	}
	b := waitBatch(t, c, submitBatch(t, c, in.Bytes()).ID)
	if b.Status != openai.BatchStatusCompleted || b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 {
		t.Fatalf("status %s, counts %+v", b.Status, b.RequestCounts)
	}
	out, errs := results(t, c, b, n)
	if len(errs) != 0 {
		t.Fatalf("%d error lines", len(errs))
	}
	for i := range n {
		r := out[fmt.Sprintf("req-%d", i)]
		var body openai.ChatCompletion
		if r.Response == nil || r.Response.StatusCode != 200 || json.Unmarshal(r.Response.Body, &body) != nil || len(body.Choices) != 1 {
			t.Fatalf("req-%d: %+v", i, r)
		}
		if want := fmt.Sprintf("[image/png %dx8 ", 8+i); !strings.Contains(body.Choices[0].Message.Content, want) {
			t.Errorf("req-%d: answer %q, want it to tell of %s", i, body.Choices[0].Message.Content, want)
		}
	}
	if got := len(m.requests()); got != n {
		t.Errorf("the backend was called %d times, want %d", got, n)
	}
}

// TestImageRawBody: a hand-written body with every refused part type
// answers 400 naming the part, as an HTTP client sees it.
func TestImageRawBody(t *testing.T) {
	g, _ := mediaGateway(t, server.Config{})
	body := `{"model":"eyes","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"video","video":{}}]}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"messages[0].content[1].type"`) || !strings.Contains(string(b), `unknown content part type \"video\"`) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
