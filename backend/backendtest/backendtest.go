// Package backendtest is the conformance suite every backend passes: its
// real client against an httptest server that speaks the provider's exact
// wire format, scenario by scenario (a plain turn, tool calls, tool results,
// structured output, each error class, a stream cut mid-way, malformed JSON,
// cancellation mid-stream). It follows the pattern of testing/slogtest.
//
// It is imported only from _test.go files.
package backendtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/google/go-cmp/cmp"
)

// APIKey is the key every backend under test is configured with. It must
// never appear, in any of the forms Leak looks for, in an error, nor when
// the Model is printed with fmt or log/slog; fixtures may quote it in the
// Auth error (see Auth) and must echo it in KeyEcho.
const APIKey = "sk-test-secret-0123456789"

// PathToken is a secret in the path of the base URL every backend under
// test is given: New receives the server's URL plus "/" + PathToken, and
// the suite strips that prefix before the fixture's Handler sees a request.
// Like APIKey, it must never appear in an error or a printed Model.
const PathToken = "pt-path-token-9876543210"

// KeyEchoMessage is the error message fixtures answer KeyEcho with: APIKey
// and PathToken in the forms a server or proxy may echo them in, PathToken
// also alone, not inside the request's path.
var KeyEchoMessage = "invalid credential: " + strings.Join(slices.Sorted(maps.Values(keyForms(APIKey))), " | ") +
	" for POST /" + PathToken + "/v1/chat/completions; unknown path token: " +
	strings.Join(slices.Sorted(maps.Values(keyForms(PathToken))), " | ")

// keyForms returns the forms of key a server may echo, by name: cases, URL
// escapes, hex and base64 (alone and of "user:KEY", ":KEY", as in HTTP
// Basic authentication).
func keyForms(key string) map[string]string {
	forms := map[string]string{
		"verbatim":                   key,
		"upper-cased":                strings.ToUpper(key),
		"lower-cased":                strings.ToLower(key),
		"query-escaped":              url.QueryEscape(key),
		"path-escaped":               url.PathEscape(key),
		"query-escaped, upper-cased": strings.ToUpper(url.QueryEscape(key)),
		"hex":                        hex.EncodeToString([]byte(key)),
		"upper-case hex":             strings.ToUpper(hex.EncodeToString([]byte(key))),
	}
	for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding, "raw base64": base64.RawStdEncoding, "raw base64url": base64.RawURLEncoding} {
		forms[name] = enc.EncodeToString([]byte(key))
		forms[name+` of "user:KEY"`] = enc.EncodeToString([]byte("user:" + key))
		forms[name+` of ":KEY"`] = enc.EncodeToString([]byte(":" + key))
	}
	return forms
}

// Leak returns what s shows of APIKey or PathToken (such as "APIKey
// base64 of \":KEY\""), or "" when it shows neither in any form Leak knows:
// any case, URL-escaped, hex, base64 (alone or of a Basic credential), and
// APIKey without its "sk-test-" prefix.
func Leak(s string) string {
	for _, secret := range []struct{ name, value string }{{"APIKey", APIKey}, {"APIKey", APIKey[len("sk-test-"):]}, {"PathToken", PathToken}} {
		for _, name := range slices.Sorted(maps.Keys(keyForms(secret.value))) {
			if strings.Contains(s, keyForms(secret.value)[name]) {
				return secret.name + " " + name
			}
		}
	}
	return ""
}

// Scenario names a wire-level situation a backend must handle.
type Scenario string

// The scenarios. Fixtures answer each with the values documented here.
const (
	// Plain: the answer PlainText with PlainUsage, finish stop.
	Plain Scenario = "plain"
	// ToolCall: the request carries ToolDefs; the answer is ToolCalls
	// (streamed arguments split across at least two chunks each).
	ToolCall Scenario = "tool_call"
	// ToolResult: the request carries an assistant tool-call turn and its
	// result (ToolResultMessages); the answer is "Done.".
	ToolResult Scenario = "tool_result"
	// Structured: the request carries OutputSpec; the answer is
	// StructuredText.
	Structured Scenario = "structured"
	// RateLimited: HTTP 429 with "retry-after: 2".
	RateLimited Scenario = "rate_limited"
	// Overloaded: HTTP 503 (529 or ServiceUnavailable where the provider
	// says overloaded that way).
	Overloaded Scenario = "overloaded"
	// ServerError: HTTP 500.
	ServerError Scenario = "server_error"
	// BadRequest: HTTP 400 with the provider's error body.
	BadRequest Scenario = "bad_request"
	// ContextLength: HTTP 400 with the provider's context-window error.
	ContextLength Scenario = "context_length"
	// Auth: HTTP 401 (403 where the provider says so). Fixtures whose
	// provider can echo the credential (a server quoting the rejected key,
	// as some do) quote APIKey in the error message, so that the suite's
	// check that no error shows the key can fail.
	Auth Scenario = "auth"
	// StreamCut (streaming only): one text chunk, then the connection
	// closes without the stream's terminator.
	StreamCut Scenario = "stream_cut"
	// Malformed: HTTP 200 whose body, or an SSE data line, is truncated
	// JSON.
	Malformed Scenario = "malformed"
	// Cancel (streaming only): one text chunk, then the server waits until
	// the client goes away.
	Cancel Scenario = "cancel"
	// KeyEcho: HTTP 400 with the provider's bad-request body whose message
	// is KeyEchoMessage, which echoes APIKey and PathToken in many forms.
	KeyEcho Scenario = "key_echo"
	// Unreachable: nothing listens at the base URL (the Handler is not
	// called); the call fails with ErrConnection, and the error, whose
	// net/http cause quotes the request URL, must not show PathToken.
	Unreachable Scenario = "unreachable"
)

// Scenarios lists every scenario in order.
var Scenarios = []Scenario{Plain, ToolCall, ToolResult, Structured, RateLimited, Overloaded, ServerError,
	BadRequest, ContextLength, Auth, StreamCut, Malformed, Cancel, KeyEcho, Unreachable}

// The values of the requests the suite sends and of the answers fixtures
// return.
const (
	ModelName      = "test-model"
	MaxTokens      = 64
	SystemText     = "You are terse."
	UserText       = "Say hello."
	PlainText      = "Hello from the fixture."
	DoneText       = "Done."
	StructuredText = `{"n":3}`
	ToolResultText = "package a"
)

// PlainUsage is the usage fixtures report for Plain.
var PlainUsage = llm.Usage{PromptTokens: 21, CompletionTokens: 5, CachedTokens: 16}

// ToolDefs are the tools of the ToolCall request.
var ToolDefs = []llm.ToolDef{
	{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "lookup", Description: "Look up an id.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)},
}

// ToolCalls are the calls fixtures answer the ToolCall request with.
var ToolCalls = []llm.ToolCall{
	{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)},
	{ID: "call_2", Name: "lookup", Arguments: json.RawMessage(`{"id":7}`)},
}

// OutputSpec is the structured-output request of Structured.
var OutputSpec = &llm.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}

// ToolResultMessages is the conversation of the ToolResult request, after
// the system message.
var ToolResultMessages = []llm.Message{
	{Role: llm.RoleUser, Content: "Read a.go."},
	{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{ToolCalls[0]}},
	{Role: llm.RoleTool, ToolCallID: "call_1", Name: "read_file", Content: ToolResultText},
}

// Backend describes a backend to the suite.
type Backend struct {
	// Name is the backend's name, as in llm.APIError.Backend.
	Name string
	// New returns the backend's real client pointed at baseURL (which ends
	// in "/" + PathToken) and configured with APIKey.
	New func(t *testing.T, baseURL string) llm.Model
	// Handler serves one scenario in the provider's exact wire format.
	// stream says whether the call is a streaming one. The handler should
	// check the request it receives (method, path, credentials, body) and
	// report problems with t.Errorf.
	Handler func(t *testing.T, s Scenario, stream bool) http.Handler
	// NoCachedTokens says the wire format has no cached-token counter, so
	// Plain's usage reports CachedTokens 0.
	NoCachedTokens bool
	// PlainCacheWriteTokens is the part of Plain's prompt tokens the
	// wire format reports as written to the cache (Anthropic's
	// cache_creation_input_tokens). Defaults to 0.
	PlainCacheWriteTokens int64
	// GeneratedContent says the server generates its answers (the
	// simulator) rather than replaying the fixture values: answers are
	// then checked for shape and validity instead of exact text — text
	// present, the requested tools called with JSON object arguments,
	// structured output valid against OutputSpec's schema, usage counted.
	GeneratedContent bool
	// RetryAfter is the wait the server asks for in RateLimited. Zero means
	// 2s.
	RetryAfter time.Duration
	// Skip lists scenarios that do not apply, with the reason.
	Skip map[Scenario]string
}

// Request returns the request the suite sends for s (see MediaScenarios
// for the media ones).
func Request(s Scenario) *llm.Request {
	if req := mediaRequest(s); req != nil {
		return req
	}
	req := &llm.Request{
		Model:     ModelName,
		MaxTokens: MaxTokens,
		Messages:  []llm.Message{{Role: llm.RoleSystem, Content: SystemText}, {Role: llm.RoleUser, Content: UserText}},
	}
	switch s {
	case ToolCall:
		req.Tools = ToolDefs
	case ToolResult:
		req.Tools = ToolDefs
		req.Messages = append(req.Messages[:1:1], ToolResultMessages...)
	case Structured:
		req.Output = OutputSpec
	}
	return req
}

// Run runs every scenario against b through Generate and, when the Model is
// an llm.Streamer, through Stream, each call on its own httptest.Server
// that counts requests: every call must make exactly one HTTP request (the
// SDK's own retries must be off). A stream must send each tool call's
// llm.EventToolCallDone once, before its usage and end, with the call's
// arguments complete.
//
// The MediaScenarios run after Scenarios, each skipped for a backend whose
// Capabilities().Media does not accept its parts.
func Run(t *testing.T, b Backend) {
	t.Helper()
	for _, s := range slices.Concat(Scenarios, MediaScenarios) {
		for _, stream := range []bool{false, true} {
			name := string(s) + "/generate"
			if stream {
				name = string(s) + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				if why, ok := b.Skip[s]; ok {
					t.Skip(why)
				}
				if !stream && (s == StreamCut || s == Cancel) {
					t.Skip("streaming only")
				}
				runOne(t, b, s, stream)
			})
		}
	}
}

func runOne(t *testing.T, b Backend, s Scenario, stream bool) {
	var (
		requests atomic.Int64
		h        http.Handler = http.NotFoundHandler()
	)
	if s != Unreachable {
		h = http.StripPrefix("/"+PathToken, b.Handler(t, s, stream))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if !strings.HasPrefix(r.URL.Path, "/"+PathToken+"/") {
			t.Errorf("%s: request path %q does not start with the base URL's /%s/", s, r.URL.Path, PathToken)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	m := b.New(t, srv.URL+"/"+PathToken)
	if s == Unreachable {
		srv.Close() // nothing listens any more
	}
	checkPrint(t, m)
	if IsMedia(s) {
		if why := mediaSkip(m, s); why != "" {
			t.Skip(why)
		}
	}
	st, isStreamer := m.(llm.Streamer)
	if stream && !isStreamer {
		t.Skip("not a Streamer")
	}
	if c, ok := m.(llm.Capable); !ok || c.Capabilities().Streaming != isStreamer {
		t.Errorf("Capabilities().Streaming disagrees with implementing llm.Streamer (%v)", isStreamer)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := Request(s)
	var (
		resp      *llm.Response
		err       error
		gotEvents int
	)
	start := time.Now()
	if !stream {
		resp, err = m.Generate(ctx, req)
	} else {
		sctx, scancel := context.WithCancel(ctx)
		var (
			acc  llm.Accumulator
			done callsDone
		)
		for ev, e := range st.Stream(sctx, req) {
			if e != nil {
				err = e
				break
			}
			gotEvents++
			acc.Add(ev)
			done.add(t, &acc, ev)
			if s == Cancel && ev.Type == llm.EventText {
				start = time.Now()
				scancel()
			}
		}
		scancel()
		if err == nil {
			resp = acc.Response()
			done.check(t, resp)
		}
	}
	if n, want := requests.Load(), int64(1); s == Unreachable && n != 0 || s != Unreachable && n != want {
		t.Errorf("%s made %d HTTP requests, want exactly 1 (SDK retries must be off; 0 when unreachable)", s, n)
	}
	check(t, b, s, stream, resp, err, gotEvents, time.Since(start))
}

// callsDone checks a stream's llm.EventToolCallDone events: one per call,
// after the call began and before EventUsage and EventDone, with the
// call's arguments complete then (but for trailing whitespace) when they
// are valid JSON in the end.
type callsDone struct {
	args map[int]string // arguments of each call at its EventToolCallDone
}

func (d *callsDone) add(t *testing.T, acc *llm.Accumulator, ev llm.Event) {
	t.Helper()
	switch ev.Type {
	case llm.EventToolCallDone:
		pos, c, ok := acc.ToolCall(ev.ToolCall.Index)
		if !ok {
			t.Errorf("EventToolCallDone for call %d, which did not begin", ev.ToolCall.Index)
			return
		}
		if _, twice := d.args[pos]; twice {
			t.Errorf("EventToolCallDone for call %d twice", ev.ToolCall.Index)
		}
		if d.args == nil {
			d.args = make(map[int]string)
		}
		d.args[pos] = string(c.Arguments)
	case llm.EventUsage, llm.EventDone:
		for pos := range acc.Response().Message.ToolCalls {
			if _, ok := d.args[pos]; !ok {
				t.Errorf("event %v before the EventToolCallDone of call %d", ev.Type, pos)
			}
		}
	}
}

func (d *callsDone) check(t *testing.T, resp *llm.Response) {
	t.Helper()
	for pos, c := range resp.Message.ToolCalls {
		got, ok := d.args[pos]
		if !ok {
			t.Errorf("call %d (%s) had no EventToolCallDone", pos, c.Name)
			continue
		}
		if final := string(c.Arguments); json.Valid(c.Arguments) && got != final && got != strings.TrimRight(final, " \t\r\n") {
			t.Errorf("call %d had arguments %q at its EventToolCallDone, %q in the end", pos, got, final)
		}
	}
}

// checkPrint fails t when printing m shows APIKey or PathToken (see Leak): through fmt, as m and
// as the struct m points to, and through log/slog's text and JSON
// handlers. fmt prints a struct's unexported fields without calling their
// String methods, so a Model must hold an llm.Secret behind a pointer (and
// may add String and GoString methods).
func checkPrint(t *testing.T, m llm.Model) {
	t.Helper()
	printed := map[string]string{"fmt of the Model": fmt.Sprintf("%v %+v %#v", m, m, m)}
	if v := reflect.ValueOf(m); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		e := v.Elem().Interface()
		printed["fmt of the struct it points to"] = fmt.Sprintf("%v %+v %#v", e, e, e)
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("model", "model", m)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("model", "model", m)
	printed["slog text"], printed["slog JSON"] = text.String(), js.String()
	for how, out := range printed {
		if what := Leak(out); what != "" {
			t.Errorf("%s shows the %s: %.300s", how, what, out)
		}
	}
}

// checkErrorPrint fails t when err, printed through fmt or log/slog, shows
// APIKey or PathToken (see Leak).
func checkErrorPrint(t *testing.T, s Scenario, err error) {
	t.Helper()
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Error("call failed", "err", err)
	slog.New(slog.NewJSONHandler(&js, nil)).Error("call failed", "err", err)
	printed := map[string]string{
		"the error's text": err.Error(),
		"fmt of the error": fmt.Sprintf("%v %+v %#v %s", err, err, err, err),
		"slog text":        text.String(),
		"slog JSON":        js.String(),
	}
	if ae, ok := errors.AsType[*llm.APIError](err); ok {
		printed["APIError.Message"] = ae.Message
	}
	for how, out := range printed {
		if what := Leak(out); what != "" {
			t.Errorf("%s: %s shows the %s: %.500s", s, how, what, out)
		}
	}
}

func check(t *testing.T, b Backend, s Scenario, stream bool, resp *llm.Response, err error, events int, took time.Duration) {
	t.Helper()
	wantClass := map[Scenario]error{
		RateLimited: llm.ErrRateLimited, Overloaded: llm.ErrOverloaded, ServerError: llm.ErrServer,
		BadRequest: llm.ErrBadRequest, ContextLength: llm.ErrContextLength, Auth: llm.ErrAuth,
		StreamCut: llm.ErrConnection, Malformed: llm.ErrServer,
		KeyEcho: llm.ErrBadRequest, Unreachable: llm.ErrConnection,
	}
	if err != nil {
		checkErrorPrint(t, s, err)
	}
	if class, ok := wantClass[s]; ok {
		if err == nil {
			t.Fatalf("%s: got response %+v, want an error wrapping %v", s, resp, class)
		}
		if !errors.Is(err, class) {
			t.Errorf("%s: error %v, want one wrapping %v", s, err, class)
		}
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Backend != b.Name {
			t.Errorf("%s: error %#v is not an *llm.APIError of backend %q", s, err, b.Name)
		}
		wantWait := b.RetryAfter
		if wantWait == 0 {
			wantWait = 2 * time.Second
		}
		if s == RateLimited && llm.RetryAfter(err) != wantWait {
			t.Errorf("%s: RetryAfter = %v, want %v", s, llm.RetryAfter(err), wantWait)
		}
		if s == BadRequest && llm.IsTransient(err) {
			t.Errorf("%s: a 400 must not be transient", s)
		}
		if s == KeyEcho && !strings.Contains(err.Error(), "invalid credential") {
			t.Errorf("%s: error %q, want the server's message (redacted)", s, err)
		}
		if s == StreamCut && events == 0 {
			t.Errorf("%s: no event before the cut, want the first text chunk", s)
		}
		return
	}
	if s == Cancel {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancel: error %v, want one wrapping context.Canceled", err)
		}
		if took > time.Second {
			t.Errorf("cancel: the stream ended %v after cancellation, want promptly", took)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", s, err)
	}
	msg := resp.Message
	if msg.Role != llm.RoleAssistant {
		t.Errorf("%s: role %q, want assistant", s, msg.Role)
	}
	if b.GeneratedContent {
		checkGenerated(t, s, resp)
		return
	}
	switch s {
	case Plain, MediaImage, MediaImageDataURL, MediaImageURL, MediaFile, MediaAudio, MediaToolImage:
		want := PlainUsage
		if b.NoCachedTokens {
			want.CachedTokens = 0
		}
		want.CacheWriteTokens = b.PlainCacheWriteTokens
		if msg.Content != PlainText || resp.FinishReason != llm.FinishStop || resp.Usage != want {
			t.Errorf("%s: content %q finish %q usage %+v; want %q, stop, %+v", s, msg.Content, resp.FinishReason, resp.Usage, PlainText, want)
		}
	case ToolCall:
		if resp.FinishReason != llm.FinishToolCalls {
			t.Errorf("tool_call: finish %q, want tool_calls", resp.FinishReason)
		}
		if diff := cmp.Diff(normalize(ToolCalls), normalize(msg.ToolCalls)); diff != "" {
			t.Errorf("tool_call: calls (-want +got):\n%s", diff)
		}
	case ToolResult:
		if msg.Content != DoneText {
			t.Errorf("tool_result: content %q, want %q", msg.Content, DoneText)
		}
	case Structured:
		if msg.Content != StructuredText || len(msg.ToolCalls) != 0 {
			t.Errorf("structured: content %q calls %v, want %s and no tool calls", msg.Content, msg.ToolCalls, StructuredText)
		}
	}
}

// checkGenerated checks an answer a server generated.
func checkGenerated(t *testing.T, s Scenario, resp *llm.Response) {
	t.Helper()
	msg := resp.Message
	if resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens <= 0 {
		t.Errorf("%s: usage %+v, want prompt and completion tokens counted", s, resp.Usage)
	}
	switch s {
	case Plain, ToolResult, MediaImage, MediaImageDataURL, MediaImageURL, MediaFile, MediaAudio, MediaToolImage:
		if msg.Content == "" || len(msg.ToolCalls) != 0 || resp.FinishReason != llm.FinishStop {
			t.Errorf("%s: content %q calls %v finish %q, want text and stop", s, msg.Content, msg.ToolCalls, resp.FinishReason)
		}
	case ToolCall:
		if resp.FinishReason != llm.FinishToolCalls || len(msg.ToolCalls) == 0 {
			t.Fatalf("tool_call: finish %q calls %v, want tool calls", resp.FinishReason, msg.ToolCalls)
		}
		for _, c := range msg.ToolCalls {
			var args map[string]any
			if c.ID == "" || (c.Name != "read_file" && c.Name != "lookup") || json.Unmarshal(c.Arguments, &args) != nil {
				t.Errorf("tool_call: call %+v, want an id, a requested tool and JSON object arguments", c)
			}
		}
	case Structured:
		var v struct {
			N *json.Number `json:"n"`
		}
		if err := json.Unmarshal([]byte(msg.Content), &v); err != nil || v.N == nil || strings.ContainsAny(v.N.String(), ".eE") {
			t.Errorf("structured: content %q, want a JSON object with an integer n", msg.Content)
		}
	}
}

// normalize re-encodes arguments so that they compare as JSON values.
func normalize(calls []llm.ToolCall) []llm.ToolCall {
	out := make([]llm.ToolCall, len(calls))
	for i, c := range calls {
		var v any
		if err := json.Unmarshal(c.Arguments, &v); err == nil {
			c.Arguments, _ = json.Marshal(v)
		}
		out[i] = c
	}
	return out
}
