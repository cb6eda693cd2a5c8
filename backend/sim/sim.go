package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"iter"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/backend/sim/internal/gen"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/llm"
)

// DefaultToolTurns is the number of turns that call tools before answering.
const DefaultToolTurns = 1

// Config configures the simulator. The zero value is valid: an instant
// model that calls every tool once and then answers.
type Config struct {
	// Latency is the time of one forward pass (prefill and first token).
	// Zero means none.
	Latency time.Duration
	// PerToken is the decode time of each generated token after the first.
	// Zero means none.
	PerToken time.Duration
	// Jitter scales every call's time by a uniform factor in
	// [1-Jitter, 1+Jitter]. Zero means none; it must be in [0, 1].
	Jitter float64
	// FailRate is the probability, in [0, 1], that a call fails with a
	// transient overload error (HTTP 503). Zero means never.
	FailRate float64
	// InvalidRate is the probability, in [0, 1], that a final answer
	// violates the output schema. Zero means never.
	InvalidRate float64
	// CorruptRate is the probability, in [0, 1], that an entry of a
	// packed answer is corrupted: left out, written twice, written under
	// an id not in the pack, or given a value that violates its schema
	// (see "Packed prompts" in the package doc). Zero means never.
	CorruptRate float64
	// PositionBias is the error rate, in [0, 1], of the last entry of a
	// packed answer: the entry at position i (from 0) of a pack of k is
	// wrong with probability PositionBias·i/(k-1), so the first is never
	// wrong and the rate grows evenly along the pack (a pack's mean is
	// PositionBias/2). A wrong entry is valid against its schema but
	// differs from the answer its task gets alone (another enum label,
	// another number), so only running the task alone tells it apart.
	// Entries already corrupted (CorruptRate) are not drawn again. Zero
	// means never.
	PositionBias float64
	// ToolTurns is how many turns call tools before the model answers.
	// Defaults to DefaultToolTurns; negative means the model never calls
	// tools.
	ToolTurns int
	// Tools names the tools the model calls on a tool turn. Empty means
	// every tool of the request.
	Tools []string
	// Seed makes answers, arguments, jitter and failures reproducible.
	Seed uint64
	// Model is the model name the simulator stands for (a URL's
	// ?model=NAME, as every backend URL takes). It changes no behaviour.
	// Empty means none.
	Model string
	// MediaTokens is the provider rule by which media parts' prompt
	// tokens are counted (a URL's ?media_tokens=openai|anthropic).
	// Empty means media.DefaultBilling, OpenAI's.
	MediaTokens media.Billing
}

func (c Config) validate() error {
	if c.Latency < 0 {
		return fmt.Errorf("sim: latency = %v, want a duration >= 0", c.Latency)
	}
	if c.PerToken < 0 {
		return fmt.Errorf("sim: per_token = %v, want a duration >= 0", c.PerToken)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"jitter", c.Jitter}, {"fail", c.FailRate}, {"invalid", c.InvalidRate}, {"corrupt", c.CorruptRate}, {"position_bias", c.PositionBias}} {
		if !(p.v >= 0 && p.v <= 1) { // NaN too
			return fmt.Errorf("sim: %s = %v, want a value in [0, 1]", p.name, p.v)
		}
	}
	if _, err := media.ParseBilling(string(c.MediaTokens)); err != nil {
		return fmt.Errorf("sim: media_tokens: %w", err)
	}
	return nil
}

// Model is the simulated model. It is safe for concurrent use.
type Model struct {
	cfg   Config
	tools map[string]bool // allowed tool names; nil means all

	calls     atomic.Int64 // model calls started, for failure injection and stats
	fails     atomic.Int64 // injected failures
	packed    atomic.Int64 // packed answers
	corrupted atomic.Int64 // corrupted entries of packed answers
	biased    atomic.Int64 // entries of packed answers made wrong by Config.PositionBias

	mu   sync.Mutex                // protects gens
	gens map[string]*gen.Generator // compiled generators by schema text; at most maxGenerators
}

// maxGenerators bounds Model.gens. Under `sim serve` clients may send any
// number of distinct schemas, so a full cache is cleared rather than left
// to grow: generators are pure functions of their schema, so a dropped one
// is only compiled again.
const maxGenerators = 1024

// New returns a simulator. It returns an error if cfg is out of range.
func New(cfg Config) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.ToolTurns == 0 {
		cfg.ToolTurns = DefaultToolTurns
	}
	if cfg.MediaTokens == "" {
		cfg.MediaTokens = media.DefaultBilling
	}
	m := &Model{cfg: cfg, gens: make(map[string]*gen.Generator)}
	if len(cfg.Tools) > 0 {
		m.tools = make(map[string]bool, len(cfg.Tools))
		for _, t := range cfg.Tools {
			m.tools[t] = true
		}
	}
	return m, nil
}

// ParseURL parses a "sim://" backend URL into a Config. Query parameters:
// latency and per_token (durations), jitter, fail, invalid and corrupt
// (probabilities), tool_turns (integer), tools (comma-separated names),
// seed (integer), model (a name) and media_tokens (openai or anthropic:
// [Config.MediaTokens]). Unknown parameters are an error.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("sim: %w", err)
	}
	if u.Scheme != "sim" {
		return Config{}, fmt.Errorf("sim: scheme %q, want \"sim\"", u.Scheme)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("sim: %w", err)
	}
	var cfg Config
	for _, key := range slices.Sorted(maps.Keys(query)) {
		vals := query[key]
		v := vals[len(vals)-1]
		switch key {
		case "latency", "per_token":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Config{}, fmt.Errorf("sim: parameter %s: %w", key, err)
			}
			if key == "latency" {
				cfg.Latency = d
			} else {
				cfg.PerToken = d
			}
		case "jitter", "fail", "invalid", "corrupt":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return Config{}, fmt.Errorf("sim: parameter %s: %w", key, err)
			}
			switch key {
			case "jitter":
				cfg.Jitter = f
			case "fail":
				cfg.FailRate = f
			case "corrupt":
				cfg.CorruptRate = f
			default:
				cfg.InvalidRate = f
			}
		case "tool_turns":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Config{}, fmt.Errorf("sim: parameter %s: %w", key, err)
			}
			if n == 0 {
				n = -1 // explicit zero: never call tools
			}
			cfg.ToolTurns = n
		case "tools":
			for t := range strings.SplitSeq(v, ",") {
				if t = strings.TrimSpace(t); t != "" {
					cfg.Tools = append(cfg.Tools, t)
				}
			}
		case "seed":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return Config{}, fmt.Errorf("sim: parameter %s: %w", key, err)
			}
			cfg.Seed = n
		case "model":
			cfg.Model = v
		case "media_tokens":
			b, err := media.ParseBilling(v)
			if err != nil {
				return Config{}, fmt.Errorf("sim: parameter %s: %w", key, err)
			}
			cfg.MediaTokens = b
		default:
			return Config{}, fmt.Errorf("sim: unknown parameter %q (known: latency, per_token, jitter, fail, invalid, corrupt, tool_turns, tools, seed, model, media_tokens)", key)
		}
	}
	return cfg, cfg.validate()
}

// Stats counts the simulator's calls.
type Stats struct {
	Calls    int64 // model calls started
	Failures int64 // injected transient failures
	// Packed counts the packed answers given: final answers to requests
	// whose output schema is named pack.SchemaName.
	Packed int64
	// Corrupted counts the entries of packed answers that were corrupted
	// (Config.CorruptRate), one per corruption drawn: a "duplicate" also
	// takes the next entry's place, which is not counted again.
	Corrupted int64
	// Biased counts the entries of packed answers made wrong by
	// Config.PositionBias: valid, but not the task's answer alone.
	Biased int64
}

// Stats returns the calls made so far.
func (m *Model) Stats() Stats {
	return Stats{Calls: m.calls.Load(), Failures: m.fails.Load(), Packed: m.packed.Load(), Corrupted: m.corrupted.Load(), Biased: m.biased.Load()}
}

// Capabilities declares the simulator's features: it streams, takes tools
// and output schemas natively, takes every kind of media part (images by
// bytes or URL, audio, documents by bytes, URL or file id; none is
// fetched, each is only counted) and runs in-process.
func (m *Model) Capabilities() llm.Capabilities {
	return llm.Capabilities{
		Streaming:        true,
		NativeTools:      true,
		NativeJSONSchema: true,
		InProcess:        true,
		Media:            llm.Media{Image: true, ImageURL: true, Audio: true, File: true, FileURL: true, FileID: true, Billing: string(m.cfg.MediaTokens)},
	}
}

// Generate simulates one model call. It returns an *llm.APIError wrapping
// llm.ErrOverloaded for an injected failure, ctx's error when ctx ends
// first, and an error for a request it cannot serve (no messages, or an
// output schema it cannot generate from).
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, tm, err := m.plan(req)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, tm.first+tm.rest); err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, overloaded()
	}
	return resp, nil
}

// Stream simulates one streamed model call: the first token arrives
// after one forward pass, then the text grows in pieces of at most
// [StreamPieceTokens] tokens, each after its tokens' decode time; tool
// calls' names come with the first token and their arguments at the end,
// after the whole decode time, each followed by its llm.EventToolCallDone. The last event comes when Generate would
// return.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	// The sequence's frame is on the caller's stack while it sleeps, under
	// every one of its caller's frames: it keeps little, and the events
	// are built in functions of their own (emit, streamAnswer), so that
	// a caller's goroutine with a small stack need not grow it.
	return func(yield func(llm.Event, error) bool) {
		resp, tm, err := m.plan(req)
		if err == nil {
			err = sleep(ctx, tm.first)
		}
		if err == nil && resp == nil {
			err = overloaded()
		}
		if err != nil {
			emitErr(yield, err)
			return
		}
		streamAnswer(ctx, resp, &tm, yield)
	}
}

// streamAnswer yields the events of resp, timed by tm, after its first
// token's time has passed; see [Model.Stream].
func streamAnswer(ctx context.Context, resp *llm.Response, tm *timing, yield func(llm.Event, error) bool) {
	text := resp.Message.Content
	calls := resp.Message.ToolCalls
	// The first token arrives after the forward pass.
	cut := min(len(text), BytesPerToken)
	for cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut++ // split between characters
	}
	if cut > 0 && !emitText(yield, text[:cut]) {
		return
	}
	for i := range calls {
		if !emitCallStart(yield, i, &calls[i]) {
			return
		}
	}
	// The rest of the text, a piece at a time, each when its last
	// token is decoded.
	var slept time.Duration // decode time waited so far
	for cut < len(text) {
		end := min(len(text), cut+StreamPieceTokens*BytesPerToken)
		for end > cut+1 && end < len(text) && !utf8.RuneStart(text[end]) {
			end-- // split between characters
		}
		at := tm.decode(int64(Tokens(end)) - 1)
		if err := sleep(ctx, at-slept); err != nil {
			emitErr(yield, err)
			return
		}
		slept = at
		if !emitText(yield, text[cut:end]) {
			return
		}
		cut = end
	}
	if err := sleep(ctx, tm.rest-slept); err != nil {
		emitErr(yield, err)
		return
	}
	for i := range calls {
		if !emitCallEnd(yield, i, &calls[i]) {
			return
		}
	}
	emitEnd(yield, resp)
}

// emitErr yields err, which ends the stream.
//
//go:noinline
func emitErr(yield func(llm.Event, error) bool, err error) {
	yield(llm.Event{}, err)
}

// emitText yields a piece of the answer's text.
//
//go:noinline
func emitText(yield func(llm.Event, error) bool, text string) bool {
	return yield(llm.Event{Type: llm.EventText, Text: text}, nil)
}

// emitCallStart yields the event that opens c, the answer's call at i:
// its ID and name.
//
//go:noinline
func emitCallStart(yield func(llm.Event, error) bool, i int, c *llm.ToolCall) bool {
	return yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name}}, nil)
}

// emitCallEnd yields the events that close c, the answer's call at i:
// its arguments, then that it is done.
//
//go:noinline
func emitCallEnd(yield func(llm.Event, error) bool, i int, c *llm.ToolCall) bool {
	return yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i, Arguments: string(c.Arguments)}}, nil) &&
		yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil)
}

// emitEnd yields the last events of resp: its usage, then the end.
//
//go:noinline
func emitEnd(yield func(llm.Event, error) bool, resp *llm.Response) {
	if yield(llm.Event{Type: llm.EventUsage, Usage: resp.Usage}, nil) {
		yield(llm.Event{Type: llm.EventDone, FinishReason: resp.FinishReason}, nil)
	}
}

// StreamPieceTokens is the most tokens of text one event of [Model.Stream]
// carries.
const StreamPieceTokens = 8

func overloaded() error {
	return &llm.APIError{Backend: "sim", StatusCode: 503, Message: "simulated overload", Err: llm.ErrOverloaded}
}

// timing is one call's timing.
type timing struct {
	first    time.Duration // forward pass: the first token
	rest     time.Duration // decode time of the other tokens
	perToken time.Duration // Config.PerToken
	scale    float64       // jitter factor
}

// decode returns the decode time of n tokens after the first.
func (tm timing) decode(n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(tm.perToken) * float64(n) * tm.scale)
}

// plan decides the outcome of one call and its timing. A nil response with
// a nil error is an injected failure.
func (m *Model) plan(req *llm.Request) (resp *llm.Response, tm timing, err error) {
	if len(req.Messages) == 0 {
		return nil, timing{}, &llm.APIError{Backend: "sim", StatusCode: 400, Message: "request has no messages", Err: llm.ErrBadRequest}
	}
	if len(req.Extra) > 0 {
		name := slices.Sorted(maps.Keys(req.Extra))[0]
		// The simulator reads no field it does not name: refused, never
		// dropped.
		return nil, timing{}, &llm.APIError{Backend: "sim", StatusCode: 400, Err: llm.ErrBadRequest,
			Message: fmt.Sprintf("the request field %q is not supported by the simulator", name)}
	}
	n := m.calls.Add(1)
	r := gen.NewRNG(m.cfg.Seed, uint64(n))
	tm = timing{perToken: m.cfg.PerToken, scale: 1}
	if m.cfg.Jitter > 0 {
		tm.scale = 1 - m.cfg.Jitter + 2*m.cfg.Jitter*r.Float64()
	}
	tm.first = time.Duration(float64(m.cfg.Latency) * tm.scale)
	if m.cfg.FailRate > 0 && r.Float64() < m.cfg.FailRate {
		m.fails.Add(1)
		return nil, timing{first: tm.first}, nil
	}
	resp, err = m.respond(req)
	if err != nil {
		return nil, timing{}, err
	}
	tm.rest = tm.decode(resp.Usage.CompletionTokens - 1)
	return resp, tm, nil
}

// respond builds the deterministic answer to req.
func (m *Model) respond(req *llm.Request) (*llm.Response, error) {
	turn, task := 0, ""
	for _, msg := range req.Messages {
		switch {
		case msg.Role == llm.RoleAssistant:
			turn++
		case msg.Role == llm.RoleUser && task == "":
			task = msg.Content
			if task == "" && len(msg.Parts) > 0 {
				task = partsText(msg.Parts)
			}
		}
	}
	// Content-seeded: the same task and turn give the same answer in any run.
	r := gen.NewRNG(m.cfg.Seed, hashString(task)^uint64(len(req.Messages)))

	resp := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant}}
	last := req.Messages[len(req.Messages)-1]
	feedback := last.Role == llm.RoleUser && turn > 0
	toolTurns := m.cfg.ToolTurns
	if n, ok := taskToolTurns(task); ok {
		toolTurns = n
	}
	if toolTurns > 0 && turn < toolTurns && !feedback {
		calls, err := m.toolCalls(req.Tools, &gen.Given{Input: req.Input, Task: task}, turn, &r)
		if err != nil {
			return nil, err
		}
		if len(calls) > 0 {
			resp.Message.ToolCalls = calls
			resp.FinishReason = llm.FinishToolCalls
		}
	}
	if resp.Message.ToolCalls == nil {
		var text string
		var err error
		if req.Output != nil && req.Output.Name == pack.SchemaName {
			text, err = m.packAnswer(req, task)
		} else {
			text, err = m.answer(req.Output, &r)
		}
		if err != nil {
			return nil, err
		}
		resp.Message.Content = text
		resp.FinishReason = llm.FinishStop
	}
	out := len(resp.Message.Content)
	for _, c := range resp.Message.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	resp.Usage = llm.Usage{PromptTokens: int64(BilledPromptTokens(req, m.cfg.MediaTokens)), CompletionTokens: int64(Tokens(out))}
	if hasMedia(req) { // text-only requests pay nothing more
		resp.Usage.MediaTokens = int64(MediaTokens(req, m.cfg.MediaTokens))
	}
	return resp, nil
}

// TaskToolTurns is the directive a task's text may carry to set its own
// number of tool turns, overriding [Config.ToolTurns]: "sim_tool_turns=N"
// (N ≥ 0; 0 means none), so that one server can script agents of
// different lengths.
const TaskToolTurns = "sim_tool_turns="

// taskToolTurns reads the TaskToolTurns directive of a task, if any.
func taskToolTurns(task string) (int, bool) {
	_, rest, ok := strings.Cut(task, TaskToolTurns)
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(rest) && end < 6 && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return 0, false
	}
	return n, true
}

// BytesPerToken is the simulated tokenizer: a token is 4 bytes of text.
// [Model] counts [llm.Usage] with it, and simhttp its prompts and
// max_tokens.
const BytesPerToken = 4

// Tokens is the simulated tokenizer's count of n bytes of text:
// BytesPerToken bytes a token, rounded up, and at least 1.
func Tokens(n int) int { return max(1, (n+BytesPerToken-1)/BytesPerToken) }

// toolCalls returns the calls of a tool turn: one per tool of defs that
// the model calls, with arguments generated from its parameter schema and
// taken from gv where a parameter matches one of its fields.
func (m *Model) toolCalls(defs []llm.ToolDef, gv *gen.Given, turn int, r *gen.RNG) ([]llm.ToolCall, error) {
	calls := make([]llm.ToolCall, 0, len(defs))
	for _, d := range defs {
		if m.tools != nil && !m.tools[d.Name] {
			continue
		}
		g, err := m.generator(d.Parameters)
		if err != nil {
			return nil, fmt.Errorf("sim: tool %s: %w", d.Name, err)
		}
		calls = append(calls, llm.ToolCall{
			ID:        "call_" + strconv.Itoa(turn) + "_" + strconv.Itoa(len(calls)),
			Name:      d.Name,
			Arguments: g.AppendValue(make([]byte, 0, 64), r, gv),
		})
	}
	return calls, nil
}

func (m *Model) answer(out *llm.OutputSpec, r *gen.RNG) (string, error) {
	if out == nil || len(out.Schema) == 0 {
		var scratch [64]byte
		return string(m.appendAnswer(scratch[:0], nil, r, false)), nil
	}
	g, err := m.generator(out.Schema)
	if err != nil {
		return "", fmt.Errorf("sim: output schema: %w", err)
	}
	// The answer is built in a pooled buffer and copied once: generation
	// is recursive, so a stack buffer would escape anyway.
	bp := answerBufs.Get().(*[]byte)
	buf := m.appendAnswer((*bp)[:0], g, r, false)
	text := string(buf)
	if cap(buf) <= 64<<10 {
		*bp = buf
		answerBufs.Put(bp)
	}
	return text, nil
}

// appendAnswer appends a final answer drawn from r: text when g is nil,
// else a value of g's schema that violates it when invalid is set or with
// probability Config.InvalidRate.
func (m *Model) appendAnswer(buf []byte, g *gen.Generator, r *gen.RNG, invalid bool) []byte {
	if g == nil {
		return gen.AppendSentence(append(buf, "Done. "...), r, 8)
	}
	if m.cfg.InvalidRate > 0 && r.Float64() < m.cfg.InvalidRate {
		invalid = true
	}
	if invalid {
		return g.AppendInvalid(buf, r)
	}
	return g.AppendValue(buf, r, nil)
}

// answerBufs holds the buffers answers are generated in.
var answerBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// generator returns the compiled generator of a schema, compiling it once.
func (m *Model) generator(schema json.RawMessage) (*gen.Generator, error) {
	m.mu.Lock()
	g, ok := m.gens[string(schema)]
	m.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := gen.Compile(schema)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if len(m.gens) >= maxGenerators {
		clear(m.gens)
	}
	m.gens[string(schema)] = g
	m.mu.Unlock()
	return g, nil
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// hashString is FNV-1a, stable across processes.
func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
