package estimate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/llm"
)

// What a dry run assumes of tool turns: see the run command's help.
const (
	// toolResultLow, toolResultTypical and toolResultHigh are the tokens
	// a tool's result adds to the conversation in the low estimate (a
	// short answer or an error), the point estimate and the high one.
	toolResultLow     = 10
	toolResultTypical = 200
	toolResultHigh    = 1000
	// BadShown caps the bad lines a dry run keeps ([Stats.Shown]).
	BadShown = 20
)

// Config is what a [Job] estimates.
type Config struct {
	// Name is the job's name, as the report names it.
	Name string
	// Path is the job file, named in errors.
	Path string
	// Spec is the job, as it would run; Model its model, whose client the
	// scan never calls.
	Spec  *batchagent.Spec
	Model llm.Model
	// Price is the price the cost is estimated at.
	Price Price
	// Inputs is the input file: CSV when its name ends in .csv, one JSON
	// array of objects when it ends in .json, else JSON lines. The caller
	// has checked its format and placeholders.
	Inputs string
	// InputTypes types a CSV file's columns as the run types them (see
	// input.TypedCSV); nil: every cell a string.
	InputTypes map[string]string
	// Backend is the URL of the backend the job runs on, whose tokenizer
	// the dry run counts with: the simulator's own on sim:// and
	// sim+http://, else tiktoken's for the job's model. "": tiktoken's.
	Backend string
}

// Job is a prepared dry run: a job, its first request's layout and its
// inputs. A Job is not safe for concurrent use.
type Job struct {
	cfg     Config
	layout  *agent.Runner // builds the agents' requests; never runs
	counter tokenizer
	// prefixLen is the messages of the shared prefix, before an agent's
	// own in each request.
	prefixLen int
}

// New prepares the dry run of cfg: the agents' request layout and the
// model's token counter. Errors name the job file.
func New(cfg Config) (*Job, error) {
	j := &Job{cfg: cfg}
	def := cfg.Spec.Def()
	// The agents' request layout: what the engine gives agent.New that
	// shapes a request (the rest only governs the loop).
	var err error
	if j.layout, err = agent.New(agent.Config{
		Model: cfg.Model, ModelName: def.ModelName, System: def.System,
		Tools: cfg.Spec.Pool(), Schema: cfg.Spec.Schema(),
		MaxTurns: def.MaxTurns, MaxTokens: def.MaxTokens, MaxTokensLimit: def.MaxTokensLimit,
		Temperature: def.Temperature, TopP: def.TopP, Seed: def.Seed, StopSequences: def.Stop,
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	if j.counter, err = tokenizerFor(cfg.Backend, def.ModelName); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	j.prefixLen = len(j.layout.Request(&agent.State{}).Messages)
	return j, nil
}

// BadLine is an input a dry run refused.
type BadLine struct {
	Index int   // 0-based, among the inputs the file yields
	Line  int   // 1-based; 0 until found
	Err   error // what is wrong, without the file and line
}

// Stats is what a dry run's read of the inputs found.
type Stats struct {
	OK, Bad int
	Shown   []BadLine // the first BadShown bad inputs
	Prefix  int       // tokens of the shared prefix
	TaskSum int64     // tokens of the valid inputs' own messages, media included
	// MediaSum is the part of TaskSum that is the inputs' media (images,
	// audio, documents), counted as the backend bills them.
	MediaSum int64
	tasks    map[int]int // the valid inputs by their own messages' tokens
}

// ext is the input file's extension, in lower case: its format.
func (j *Job) ext() string { return strings.ToLower(filepath.Ext(j.cfg.Inputs)) }

// items opens the input file and returns its items; the caller closes
// the file.
func (j *Job) items() (*os.File, batchagent.Inputs, error) {
	f, err := os.Open(j.cfg.Inputs)
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	name := filepath.Base(j.cfg.Inputs)
	switch j.ext() {
	case ".csv":
		if len(j.cfg.InputTypes) > 0 {
			return f, input.TypedCSV(f, name, j.cfg.InputTypes), nil
		}
		return f, batchagent.CSV(f, name), nil
	case ".json":
		return f, input.JSONArray(f, name), nil
	}
	return f, batchagent.JSONL(f, name), nil
}

// firstMessages returns the agent's own messages of its first request for
// input in: the rendered task, as the engine starts a fresh agent.
func (j *Job) firstMessages(in batchagent.Input) ([]llm.Message, error) {
	task, err := j.cfg.Spec.Template().Render(in)
	if err != nil {
		return nil, err
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: task}}}
	return j.layout.Request(st).Messages[j.prefixLen:], nil
}

// Scan reads every input lazily, renders its first request and counts its
// tokens. Memory stays bounded: it keeps the first bad lines and a
// histogram of token counts, never the inputs. It returns ctx's error
// when ctx ends first.
func (j *Job) Scan(ctx context.Context) (*Stats, error) {
	st := &Stats{tasks: map[int]int{}}
	st.Prefix = j.counter.Count(j.layout.Request(&agent.State{}))
	f, items, err := j.items()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	index := 0
	for in, err := range items {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		i := index
		index++
		var msgs []llm.Message
		if err == nil {
			msgs, err = j.firstMessages(in)
		}
		if err != nil {
			st.Bad++
			if len(st.Shown) < BadShown {
				st.Shown = append(st.Shown, badLineOf(i, err))
			}
			continue
		}
		mt, err := j.mediaTokens(ctx, in)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			st.Bad++
			if len(st.Shown) < BadShown {
				st.Shown = append(st.Shown, badLineOf(i, err))
			}
			continue
		}
		n := j.ownTokens(msgs, st.Prefix) + mt
		st.OK++
		st.TaskSum += int64(n)
		st.MediaSum += int64(mt)
		st.tasks[n]++
	}
	return st, j.findLines(st)
}

// mediaTokens loads the media of input in through the job's media loader,
// one item at a time, and returns their prompt tokens as the backend
// bills them; the bytes are dropped at once, so memory stays bounded at
// any number of inputs. A text-only job costs nothing. A media item that
// does not load (missing, outside the roots, too large) is the input's
// error, naming its field and reference.
func (j *Job) mediaTokens(ctx context.Context, in batchagent.Input) (int, error) {
	ms := j.cfg.Spec.Media()
	if ms == nil {
		return 0, nil
	}
	parts, err := ms.Load(ctx, in)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range parts {
		n += j.counter.media(&parts[i])
	}
	return n, nil
}

// ownTokens returns the tokens an input's own first messages msgs add to
// the shared prefix of prefix tokens: counted alone where counts add up,
// else the whole first request's count less the prefix's.
func (j *Job) ownTokens(msgs []llm.Message, prefix int) int {
	if j.counter.additive() {
		return j.counter.Count(&llm.Request{Messages: msgs})
	}
	req := j.layout.Request(&agent.State{})
	req.Messages = append(slices.Clip(req.Messages), msgs...)
	return j.counter.Count(req) - prefix
}

// badLineOf returns the bad input i that failed with err: a read or decode
// error names its line; a template error's line is found later.
func badLineOf(i int, err error) BadLine {
	if ie, ok := errors.AsType[*batchagent.InputError](err); ok {
		return BadLine{Index: i, Line: ie.Line, Err: ie.Err}
	}
	return BadLine{Index: i, Err: err}
}

// findLines finds the lines of the shown bad inputs that failed to render
// (their errors name no line): a read of the file up to each.
func (j *Job) findLines(st *Stats) error {
	lineOf := input.LineJSONL
	switch j.ext() {
	case ".csv":
		lineOf = input.LineCSV
	case ".json":
		lineOf = input.LineJSONArray
	}
	for k := range st.Shown {
		b := &st.Shown[k]
		if b.Line != 0 {
			continue
		}
		f, err := os.Open(j.cfg.Inputs)
		if err != nil {
			return fmt.Errorf("inputs: %w", err)
		}
		b.Line, err = lineOf(f, b.Index)
		f.Close()
		if err != nil {
			return fmt.Errorf("inputs: %w", err)
		}
	}
	return nil
}

// sampleIndices returns k of the n valid inputs' ordinals, evenly spread:
// the middle of each of k equal stretches; all of them when k >= n.
func sampleIndices(n, k int) []int {
	k = min(k, n)
	out := make([]int, k)
	for j := range k {
		out[j] = (2*j + 1) * n / (2 * k)
	}
	return out
}

// Sample runs k valid inputs of those st counted, evenly spread over the
// file, through an engine of cfg and the job's real backend, with no
// checkpoint store and no output, and returns their results, indexed in
// sample order. It returns ctx's error when ctx ends first.
func (j *Job) Sample(ctx context.Context, cfg batchagent.Config, st *Stats, k int) ([]batchagent.Result, error) {
	want := sampleIndices(st.OK, k)
	picked := make([]batchagent.Input, 0, len(want))
	ordinal := 0
	file, items, err := j.items()
	if err != nil {
		return nil, err
	}
	defer file.Close()
	for in, err := range items {
		if len(picked) == len(want) {
			break
		}
		if err != nil {
			continue
		}
		if _, err := j.firstMessages(in); err != nil {
			continue
		}
		if _, err := j.mediaTokens(ctx, in); err != nil {
			continue // a bad line of the scan: not among st.OK's ordinals
		}
		if ordinal == want[len(picked)] {
			picked = append(picked, in)
		}
		ordinal++
	}
	e, err := batchagent.New(cfg)
	if err != nil {
		return nil, err
	}
	results, err := e.Run(ctx, j.cfg.Spec, batchagent.Slice(picked))
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

// Report estimates the run of the valid inputs st counted from the output
// schema.
func (j *Job) Report(st *Stats) *Report {
	spec, price := j.cfg.Spec, j.cfg.Price
	def := spec.Def()
	rep := &Report{
		Job: j.cfg.Name, Inputs: j.cfg.Inputs, InputsOK: st.OK, InputsBad: st.Bad, Method: "schema", Tokenizer: j.counter.name,
		Delivery: deliveryName(price.Batch), SharedPrefixTokens: st.Prefix, TaskTokens: st.spread(), Model: def.ModelName,
		MaxTurns: def.MaxTurns, Tools: spec.Pool() != nil, Pack: spec.Pack().On(), PackSize: spec.Pack().MaxAgents,
		PackAuto: spec.Pack().Auto, PackVerify: spec.Pack().Verify,
	}
	if p := price.Price; price.Known {
		cached := p.CachedInput
		if cached == 0 {
			cached = p.Input
		}
		rep.Price = &Rate{Input: p.Input, CachedInput: cached, Output: p.Output, BatchDiscount: p.BatchDiscount}
		rep.PriceSource = price.Source
		if price.Batch && price.Realtime != p {
			rt := price.Realtime
			rep.RealtimePrice = &Rate{Input: rt.Input, CachedInput: cmp.Or(rt.CachedInput, rt.Input), Output: rt.Output}
		}
	} else {
		rep.UnknownPrice = price.Summary(llm.Usage{})
	}
	ans := j.answerTokens()
	rep.AnswerTokens = &ans
	n, prefix, tasks := int64(st.OK), int64(st.Prefix), st.TaskSum
	// lo, est and hi are the run's usage at the low end, the point
	// estimate and the high end; calls and pref (the shared prefix's
	// part of the prompt) likewise. Only the low end counts cached
	// tokens: every token sent again, where the backend caches prefixes.
	var lo, est, hi llm.Usage
	var calls, pref Span
	switch {
	case rep.Tools:
		c, call, result := j.toolTurns(rep.MaxTurns)
		rep.CallsPerAgent = c
		// Call k (0-based) sends the first request again and k tool turns
		// of growth: the turn's calls and their results.
		usage := func(c, call, result, ans int64) llm.Usage {
			return llm.Usage{
				PromptTokens:     c*(n*prefix+tasks) + n*(call+result)*c*(c-1)/2,
				CompletionTokens: n * ((c-1)*call + ans),
			}
		}
		lo = usage(c.Low, call.Low, result.Low, ans.Low)
		// At the low end a prefix cache serves all but each agent's task
		// and tool results: what no earlier call sent.
		lo.CachedTokens = lo.PromptTokens - tasks - n*(c.Low-1)*result.Low
		est = usage(c.Estimate, call.Estimate, result.Estimate, ans.Estimate)
		hi = usage(c.High, call.High, result.High, ans.High)
		calls = Span{Estimate: n * c.Estimate, Low: n * c.Low, High: n * c.High}
		pref = Span{Estimate: c.Estimate * n * prefix, Low: c.Low * n * prefix, High: c.High * n * prefix}
	case rep.Pack:
		k := (n + int64(def.Pack.MaxAgents) - 1) / int64(def.Pack.MaxAgents)
		rep.CallsPerAgent = mid(1, 1)
		calls = mid(k, k)
		lo.PromptTokens, est.PromptTokens, hi.PromptTokens = k*prefix+tasks, k*prefix+tasks, k*prefix+tasks
		pref = mid(k*prefix, k*prefix)
	default:
		c := j.answerCalls(rep.MaxTurns)
		rep.CallsPerAgent = c
		calls = Span{Estimate: n * c.Estimate, Low: n * c.Low, High: n * c.High}
		// A repair turn sends the conversation again with the answer and
		// the schema's complaint (about as long as the answer) added.
		usage := func(c, ans int64) llm.Usage {
			return llm.Usage{PromptTokens: c*(n*prefix+tasks) + n*2*ans*c*(c-1)/2, CompletionTokens: n * c * ans}
		}
		lo, est, hi = usage(c.Low, ans.Low), usage(c.Estimate, ans.Estimate), usage(c.High, ans.High)
		pref = Span{Estimate: c.Estimate * n * prefix, Low: c.Low * n * prefix, High: c.High * n * prefix}
	}
	if !rep.Tools {
		lo.CachedTokens = lo.PromptTokens - tasks // all but the tasks
	}
	if j.counter.sim != nil {
		lo.CachedTokens = 0 // the in-process simulator caches nothing
	}
	if rep.Pack {
		lo.CompletionTokens, est.CompletionTokens, hi.CompletionTokens = n*ans.Low, n*ans.Estimate, n*ans.High
	}
	rep.Calls = calls
	if m := st.MediaSum; m > 0 {
		// Every call of an agent sends its first message, media and all.
		c := rep.CallsPerAgent
		rep.MediaTokens = &Span{Estimate: c.Estimate * m, Low: c.Low * m, High: c.High * m}
	}
	rep.PromptTokens = Span{Estimate: est.PromptTokens, Low: lo.PromptTokens, High: hi.PromptTokens}
	rep.SharedPrefix = &pref
	rep.CompletionTokens = Span{Estimate: est.CompletionTokens, Low: lo.CompletionTokens, High: hi.CompletionTokens}
	if rep.Price != nil {
		rep.Cost = &CostSpan{Estimate: rep.Price.cost(est), Low: rep.Price.cost(lo), High: rep.Price.cost(hi)}
	}
	return rep
}

// answerTokens returns the tokens of an agent's final answer: the output
// schema's short, typical and long answer (schemaAnswers, schemaTypical),
// else freeTextLow to freeTextHigh around the backend's typical free
// text; at most the job's max_tokens.
func (j *Job) answerTokens() Span {
	p := j.counter.profile()
	lo, typ, hi := int64(freeTextLow), int64(p.freeText), int64(freeTextHigh)
	if s := j.cfg.Spec.Schema(); s != nil {
		if short, long, err := schemaAnswers(s.Raw()); err == nil {
			lo, hi = int64(j.counter.Text(short)), int64(j.counter.Text(long))
			typ = (lo + hi) / 2
			if t, err := schemaTypical(s.Raw(), p.typicalString); err == nil {
				typ = int64(j.counter.Text(t))
			}
		}
	}
	if mt := int64(j.cfg.Spec.Def().MaxTokens); mt > 0 {
		lo, typ, hi = min(lo, mt), min(typ, mt), min(hi, mt)
	}
	lo, hi = max(lo, 1), max(hi, 1)
	return Span{Estimate: min(max(typ, lo), hi), Low: lo, High: hi}
}

// answerCalls returns the calls of an agent without tools: one, and on
// the simulator with an invalid rate up to max_turns (repair turns).
func (j *Job) answerCalls(maxTurns int) Span {
	if c := j.counter.sim; c != nil && c.InvalidRate > 0 {
		return Span{Estimate: 1, Low: 1, High: int64(max(1, maxTurns))}
	}
	return mid(1, 1)
}

// toolTurns returns what an agent with tools does: its model calls, and
// per tool turn the completion tokens of its tool calls and the tokens of
// their results.
//
// On sim:// the simulator's own behaviour is known: each of its tool
// turns (tool_turns, within max_turns) calls every tool it may (its
// tools parameter), then it answers; repair turns only when its invalid
// rate is above 0. Elsewhere an agent makes 2 calls (a tool turn, then
// the answer) to max_turns calls, a turn calling the cheapest tool once
// in the low estimate and every tool at once in the high one.
//
// A call costs its tool's name and arguments: the arguments of the
// tool's parameter schema's short, typical and long answer. A result adds
// toolResultLow, toolResultTypical or toolResultHigh tokens.
func (j *Job) toolTurns(maxTurns int) (calls, call, result Span) {
	defs := j.layout.Request(&agent.State{}).Tools
	maxTurns = max(1, maxTurns)
	args := make([]Span, 0, len(defs))
	p := j.counter.profile()
	simCfg := j.counter.sim
	if simCfg != nil && strings.Contains(j.cfg.Spec.Def().Task, "sim_tool_turns=") {
		simCfg = nil // the inputs set their own tool turns
	}
	for _, d := range defs {
		if simCfg != nil && len(simCfg.Tools) > 0 && !slices.Contains(simCfg.Tools, d.Name) {
			continue
		}
		a := mid(int64(j.counter.Text(d.Name+"{}")), int64(j.counter.Text(d.Name+words(longString))))
		if short, long, err := schemaAnswers(d.Parameters); err == nil {
			a.Low, a.High = int64(j.counter.Text(d.Name+short)), int64(j.counter.Text(d.Name+long))
			a.Estimate = (a.Low + a.High) / 2
			if t, err := schemaTypical(d.Parameters, p.typicalString); err == nil {
				a.Estimate = int64(j.counter.Text(d.Name + t))
			}
		}
		args = append(args, a)
	}
	if simCfg != nil {
		turns := simCfg.ToolTurns
		if turns == 0 {
			turns = 1 // sim.DefaultToolTurns
		}
		c := int64(min(max(turns, 0), maxTurns-1) + 1)
		if len(args) == 0 {
			c = 1 // no tool it may call: it answers at once
		}
		calls = Span{Estimate: c, Low: c, High: c}
		if simCfg.InvalidRate > 0 {
			calls.High = max(c, int64(maxTurns))
		}
		k := int64(len(args))
		for _, a := range args {
			call.Low, call.Estimate, call.High = call.Low+a.Low, call.Estimate+a.Estimate, call.High+a.High
		}
		result = Span{Estimate: k * toolResultTypical, Low: k * toolResultLow, High: k * toolResultHigh}
		return calls, call, result
	}
	cLo, cHi := int64(min(2, maxTurns)), int64(maxTurns)
	calls = mid(cLo, cHi)
	if len(args) == 0 {
		return calls, call, result
	}
	call.Low = args[0].Low
	for _, a := range args {
		call.Low = min(call.Low, a.Low)
		call.Estimate += a.Estimate
		call.High += a.High
	}
	call.Estimate /= int64(len(args)) // one call of a typical tool
	result = Span{Estimate: toolResultTypical, Low: toolResultLow, High: int64(len(args)) * toolResultHigh}
	return calls, call, result
}

// mid returns the span from lo to hi with their midpoint as estimate.
func mid(lo, hi int64) Span { return Span{Estimate: (lo + hi) / 2, Low: lo, High: hi} }

// spread returns the smallest, median and largest task tokens.
func (st *Stats) spread() Spread {
	if st.OK == 0 {
		return Spread{}
	}
	keys := slices.Sorted(maps.Keys(st.tasks))
	s := Spread{Min: int64(keys[0]), Max: int64(keys[len(keys)-1])}
	seen, half := 0, (st.OK+1)/2
	for _, k := range keys {
		if seen += st.tasks[k]; seen >= half {
			s.Median = int64(k)
			break
		}
	}
	return s
}

// deliveryName names a job's delivery as the report writes it.
func deliveryName(batch bool) string {
	if batch {
		return "batch"
	}
	return "realtime"
}
