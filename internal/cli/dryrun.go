package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
)

// What a dry run assumes of tool turns: see the run command's help.
const (
	// toolTurnTokens is the completion tokens of a turn that calls a tool
	// (its name and arguments).
	toolTurnTokens = 40
	// toolResultLow and toolResultHigh are the tokens a tool's result adds
	// to the conversation in the low and the high estimate.
	toolResultLow  = 100
	toolResultHigh = 1000
	// badShown caps the bad lines a dry run lists.
	badShown = 20
)

// dryRunHelp is the run command's help on --dry-run.
const dryRunHelp = `
--dry-run reads the job and every input without running anything: no
model call, no state file, no output. It renders each input's first request
as the agents build it (system prompt with the output schema's
instructions, tool definitions, the task) and counts its tokens offline
(the shared prefix once, each input's task), reports every bad input line
as FILE:LINE on stderr (the first 20, then a count; exit status 1), and
prints the estimated model calls, prompt tokens (of which the shared
prefix), completion tokens and cost of the other inputs, each with a
low-high range. Without --sample the answers come from the output schema
(a short answer: required properties, minItems, short strings; a long one:
every property, maxItems or 5 items, maxLength or 200-character strings;
20-300 tokens without a schema), one call per agent without tools; with
tools, 2 calls (a tool turn, then the answer) to max_turns calls, each
tool turn costing 40 completion tokens and growing the conversation that
the next call sends again by 40 tokens plus a tool result of 100 (low) to
1000 (high) tokens. Packing jobs make ceil(inputs / pack.max_agents) calls,
each sending the shared prefix once. --sample K instead runs K inputs,
evenly spread over the file, for real (their results are not written) and
scales their measured calls and tokens per agent (median; low and high
from the smallest and largest) to all the inputs. --json prints the
estimate as one JSON object. Exit status 1 when a line is bad or a sampled
agent failed.`

// dryRunContradictions are the run flags that only make sense for a real
// run: --dry-run refuses them.
var dryRunContradictions = []string{"out", "state", "no-state", "force", "retry-failed", "ordered", "redis", "run-id", "window", "metrics-addr", "openai-batch", "config", "batch-state", "ui", "ui-public", "ui-linger"}

// checkDryRunFlags rejects --sample or --json without --dry-run, a
// --sample below 1, and --dry-run with a flag of a real run, naming both.
func checkDryRunFlags(f runFlags, changed func(string) bool) error {
	if !f.dryRun {
		for _, name := range []string{"sample", "json"} {
			if changed(name) {
				return fmt.Errorf("--%s goes with --dry-run: add --dry-run, or drop --%s", name, name)
			}
		}
		return nil
	}
	if changed("sample") && f.sample < 1 {
		return fmt.Errorf("--sample %d: want 1 input or more", f.sample)
	}
	for _, name := range dryRunContradictions {
		if changed(name) {
			return fmt.Errorf("--dry-run and --%s contradict each other: a dry run writes no output or state and runs nothing; drop one", name)
		}
	}
	return nil
}

// runDryRun is `batchagent run --dry-run`: it estimates the job at path
// without running it, or runs --sample inputs only.
func runDryRun(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) int {
	d, err := prepareDryRun(ctx, path, f)
	if d != nil {
		defer func() {
			if err := d.r.close(); err != nil {
				fmt.Fprintln(stderr, "batchagent run: warning:", err)
			}
		}()
	}
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return exitUsage
	}
	st, err := d.scan(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "batchagent run:", err)
		return failedOrInterrupted(ctx)
	}
	d.reportBad(st, stderr)
	rep := d.report(st)
	code := exitOK
	if st.bad > 0 {
		code = exitFailed
	}
	if f.sample > 0 && st.ok > 0 {
		results, err := d.runSample(ctx, st, f)
		if err != nil {
			fmt.Fprintln(stderr, "batchagent run: --sample:", err)
			return failedOrInterrupted(ctx)
		}
		for _, res := range results {
			if res.Err != nil {
				fmt.Fprintf(stderr, "batchagent run: --sample: input %d: %v\n", res.Index+1, res.Err)
				code = exitFailed
			}
		}
		rep.fromSample(results, d.r.price)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "batchagent run:", err)
			return exitFailed
		}
		return code
	}
	rep.write(stdout)
	return code
}

// failedOrInterrupted is the exit status of a dry run that failed: 130
// when a signal ended ctx.
func failedOrInterrupted(ctx context.Context) int {
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitFailed
}

// dryRun is a prepared dry run: the job, its first request's layout and
// its inputs.
type dryRun struct {
	r       *runner // the job's name, spec, tools and price; no engine, store or output
	cj      *config.Job
	model   llm.Model
	layout  *agent.Runner // builds the agents' requests; never runs
	counter *tokens.Counter
	inPath  string
	format  inputFormat
	// prefixLen is the messages of the shared prefix, before an agent's
	// own in each request.
	prefixLen int
}

// prepareDryRun loads the job file as run does (the same errors), builds
// its spec and tools and checks its inputs' placeholders; it opens no
// state, output or lock. The backend's client is built, as run builds it,
// but not called. The caller closes the returned dryRun's runner, also on
// error.
func prepareDryRun(ctx context.Context, path string, f runFlags) (*dryRun, error) {
	cj, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	d := &dryRun{cj: cj, r: &runner{name: jobName(path, cj), price: priceOf(cj)}}
	if _, d.model, err = d.r.openModel(ctx, cj, f.backend); err != nil {
		return d, err
	}
	if d.r.tools, err = buildTools(ctx, cj); err != nil {
		return d, err
	}
	if d.r.spec, err = d.r.buildSpec(ctx, path, cj, d.model); err != nil {
		return d, err
	}
	d.inPath = cj.Inputs
	if f.inputs != "" {
		d.inPath = f.inputs
	}
	if d.inPath == "" {
		return d, fmt.Errorf("%s: no inputs: set inputs: in the job file or pass --inputs FILE", path)
	}
	if d.format, err = inputFormatOf(d.inPath); err != nil {
		return d, err
	}
	if err := checkPlaceholders(path, cj.Def.Task, d.inPath); err != nil {
		return d, err
	}
	def := d.r.spec.Def()
	// The agents' request layout: what the engine gives agent.New that
	// shapes a request (the rest only governs the loop).
	if d.layout, err = agent.New(agent.Config{
		Model: d.model, ModelName: def.ModelName, System: def.System,
		Tools: d.r.spec.Pool(), Schema: d.r.spec.Schema(),
		MaxTurns: def.MaxTurns, MaxTokens: def.MaxTokens, MaxTokensLimit: def.MaxTokensLimit,
		Temperature: def.Temperature, TopP: def.TopP, Seed: def.Seed, StopSequences: def.Stop,
	}); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	if d.counter, err = tokens.New(def.ModelName); err != nil {
		return d, err
	}
	d.prefixLen = len(d.layout.Request(&agent.State{}).Messages)
	return d, nil
}

// badLine is an input a dry run refused.
type badLine struct {
	index int   // 0-based, among the inputs the file yields
	line  int   // 1-based; 0 until found
	err   error // what is wrong, without the file and line
}

// dryStats is what a dry run's read of the inputs found.
type dryStats struct {
	ok, bad int
	shown   []badLine   // the first badShown bad inputs
	prefix  int         // tokens of the shared prefix
	taskSum int64       // tokens of the valid inputs' own messages
	tasks   map[int]int // the valid inputs by their own messages' tokens
}

// items opens the input file and returns its items; the caller closes
// the file.
func (d *dryRun) items() (*os.File, batchagent.Inputs, error) {
	f, err := os.Open(d.inPath)
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	return f, d.format.decode(f, filepath.Base(d.inPath)), nil
}

// firstMessages returns the agent's own messages of its first request for
// input in: the rendered task, as the engine starts a fresh agent.
func (d *dryRun) firstMessages(in batchagent.Input) ([]llm.Message, error) {
	task, err := d.r.spec.Template().Render(in)
	if err != nil {
		return nil, err
	}
	st := &agent.State{Messages: []llm.Message{{Role: llm.RoleUser, Content: task}}}
	return d.layout.Request(st).Messages[d.prefixLen:], nil
}

// scan reads every input lazily, renders its first request and counts its
// tokens. Memory stays bounded: it keeps the first bad lines and a
// histogram of token counts, never the inputs.
func (d *dryRun) scan(ctx context.Context) (*dryStats, error) {
	st := &dryStats{tasks: map[int]int{}}
	st.prefix = d.counter.Count(d.layout.Request(&agent.State{}))
	f, items, err := d.items()
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
			msgs, err = d.firstMessages(in)
		}
		if err != nil {
			st.bad++
			if len(st.shown) < badShown {
				st.shown = append(st.shown, badLineOf(i, err))
			}
			continue
		}
		n := d.counter.Count(&llm.Request{Messages: msgs})
		st.ok++
		st.taskSum += int64(n)
		st.tasks[n]++
	}
	return st, d.findLines(st)
}

// badLineOf returns the bad input i that failed with err: a read or decode
// error names its line; a template error's line is found later.
func badLineOf(i int, err error) badLine {
	if ie, ok := errors.AsType[*batchagent.InputError](err); ok {
		return badLine{index: i, line: ie.Line, err: ie.Err}
	}
	return badLine{index: i, err: err}
}

// findLines finds the lines of the shown bad inputs that failed to render
// (their errors name no line): a read of the file up to each.
func (d *dryRun) findLines(st *dryStats) error {
	lineOf := input.LineJSONL
	if strings.EqualFold(filepath.Ext(d.inPath), ".csv") {
		lineOf = input.LineCSV
	}
	for k := range st.shown {
		b := &st.shown[k]
		if b.line != 0 {
			continue
		}
		f, err := os.Open(d.inPath)
		if err != nil {
			return fmt.Errorf("inputs: %w", err)
		}
		b.line, err = lineOf(f, b.index)
		f.Close()
		if err != nil {
			return fmt.Errorf("inputs: %w", err)
		}
	}
	return nil
}

// reportBad writes the bad lines as FILE:LINE: what, the first badShown,
// then how many more.
func (d *dryRun) reportBad(st *dryStats, w io.Writer) {
	for _, b := range st.shown {
		fmt.Fprintf(w, "%s:%d: %v\n", shownPath(d.inPath), b.line, b.err)
	}
	if more := st.bad - len(st.shown); more > 0 {
		fmt.Fprintf(w, "%s: and %d more bad lines\n", shownPath(d.inPath), more)
	}
	if st.bad > 0 {
		fmt.Fprintf(w, "batchagent run: %d of %d inputs are bad; the estimate covers the other %d\n", st.bad, st.bad+st.ok, st.ok)
	}
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

// runSample runs f.sample valid inputs, evenly spread over the file,
// through the real engine and backend, with no checkpoint store and no
// output, and returns their results, indexed in sample order.
func (d *dryRun) runSample(ctx context.Context, st *dryStats, f runFlags) ([]batchagent.Result, error) {
	want := sampleIndices(st.ok, f.sample)
	picked := make([]batchagent.Input, 0, len(want))
	ordinal := 0
	file, items, err := d.items()
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
		if _, err := d.firstMessages(in); err != nil {
			continue
		}
		if ordinal == want[len(picked)] {
			picked = append(picked, in)
		}
		ordinal++
	}
	cfg, err := engineConfig(d.cj, d.model, f.logger)
	if err != nil {
		return nil, err
	}
	e, err := batchagent.New(cfg)
	if err != nil {
		return nil, err
	}
	results, err := e.Run(ctx, d.r.spec, batchagent.Slice(picked))
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

// span is an estimated count: a point estimate and its range.
type span struct {
	Estimate int64 `json:"estimate"`
	Low      int64 `json:"low"`
	High     int64 `json:"high"`
}

// costSpan is an estimated cost, in the price's currency (US dollars for
// the built-in table).
type costSpan struct {
	Estimate float64 `json:"estimate"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
}

// spread is the smallest, median and largest of per-input counts.
type spread struct {
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
}

// dryReport is a dry run's estimate; --json writes it as one object.
type dryReport struct {
	// Job is the job's name; Inputs the input file.
	Job    string `json:"job"`
	Inputs string `json:"inputs"`
	// InputsOK and InputsBad count the inputs; the estimate covers the
	// OK ones.
	InputsOK  int `json:"inputs_ok"`
	InputsBad int `json:"inputs_bad"`
	// Method is "schema" (answers estimated from the output schema, no
	// model call) or "sample" (Sampled inputs run for real).
	Method  string `json:"method"`
	Sampled int    `json:"sampled,omitempty"`
	// SharedPrefixTokens is the tokens every call sends first (system
	// prompt, schema instructions, tool definitions); TaskTokens the
	// tokens of each input's own task in its first request.
	SharedPrefixTokens int    `json:"shared_prefix_tokens"`
	TaskTokens         spread `json:"task_tokens"`
	// AnswerTokens (schema method) is the tokens of an agent's final
	// answer: the schema's short and long answer.
	AnswerTokens *span `json:"answer_tokens,omitempty"`
	// CallsPerAgent is the model calls of one agent.
	CallsPerAgent span `json:"calls_per_agent"`
	// Calls, PromptTokens, SharedPrefix (the part of PromptTokens that is
	// the shared prefix; schema method), CachedTokens (sample method) and
	// CompletionTokens are the whole run's.
	Calls            span  `json:"calls"`
	PromptTokens     span  `json:"prompt_tokens"`
	SharedPrefix     *span `json:"shared_prefix_prompt_tokens,omitempty"`
	CachedTokens     *span `json:"cached_tokens,omitempty"`
	CompletionTokens span  `json:"completion_tokens"`
	// Model is the job's model; Price its price per million tokens and
	// PriceSource where that comes from ("file", "table dated D"); both
	// absent when no price is known, and Cost then too.
	Model       string    `json:"model"`
	Price       *dryPrice `json:"price,omitempty"`
	PriceSource string    `json:"price_source,omitempty"`
	Cost        *costSpan `json:"cost,omitempty"`
	// SampleCost is what the sampled inputs cost (sample method, known
	// price).
	SampleCost *float64 `json:"sample_cost,omitempty"`

	unknownPrice string // the summary's line when no price is known
	maxTurns     int
	tools, pack  bool
	packSize     int // pack.max_agents
}

// dryPrice is a price per million tokens, as --json writes it.
type dryPrice struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
	// BatchDiscount is the share the provider takes off for calls made
	// through its own batch API (the built-in table's; 0: none known).
	BatchDiscount float64 `json:"batch_discount,omitempty"`
}

// cost is the cost of u at p.
func (p dryPrice) cost(u llm.Usage) float64 {
	return llm.Price{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output}.Cost(u)
}

// report estimates the run of the valid inputs from the output schema.
func (d *dryRun) report(st *dryStats) *dryReport {
	def := d.r.spec.Def()
	rep := &dryReport{
		Job: d.r.name, Inputs: shownPath(d.inPath), InputsOK: st.ok, InputsBad: st.bad, Method: "schema",
		SharedPrefixTokens: st.prefix, TaskTokens: st.spread(), Model: def.ModelName,
		maxTurns: def.MaxTurns, tools: d.r.spec.Pool() != nil, pack: d.r.spec.Pack().On(), packSize: d.r.spec.Pack().MaxAgents,
	}
	if p := d.r.price.price; d.r.price.known {
		cached := p.CachedInput
		if cached == 0 {
			cached = p.Input
		}
		rep.Price = &dryPrice{Input: p.Input, CachedInput: cached, Output: p.Output, BatchDiscount: p.BatchDiscount}
		rep.PriceSource = d.r.price.source
	} else {
		rep.unknownPrice = d.r.price.summary(llm.Usage{})
	}
	ans := d.answerTokens()
	rep.AnswerTokens = &ans
	n, prefix, tasks := int64(st.ok), int64(st.prefix), st.taskSum
	var lo, hi llm.Usage
	var prefLo, prefHi int64
	switch {
	case rep.tools:
		cLo, cHi := int64(min(2, rep.maxTurns)), int64(rep.maxTurns)
		rep.CallsPerAgent = mid(cLo, cHi)
		// Call k (0-based) sends the first request again and k tool turns
		// of growth.
		grown := func(c, growth int64) int64 { return c*(n*prefix+tasks) + n*growth*c*(c-1)/2 }
		lo.PromptTokens = grown(cLo, toolTurnTokens+toolResultLow)
		hi.PromptTokens = grown(cHi, toolTurnTokens+toolResultHigh)
		lo.CompletionTokens = n * ((cLo-1)*toolTurnTokens + ans.Low)
		hi.CompletionTokens = n * ((cHi-1)*toolTurnTokens + ans.High)
		prefLo, prefHi = cLo*n*prefix, cHi*n*prefix
		rep.Calls = mid(n*cLo, n*cHi)
	case rep.pack:
		calls := (n + int64(def.Pack.MaxAgents) - 1) / int64(def.Pack.MaxAgents)
		rep.CallsPerAgent = mid(1, 1)
		rep.Calls = mid(calls, calls)
		lo.PromptTokens, hi.PromptTokens = calls*prefix+tasks, calls*prefix+tasks
		lo.CompletionTokens, hi.CompletionTokens = n*ans.Low, n*ans.High
		prefLo, prefHi = calls*prefix, calls*prefix
	default:
		rep.CallsPerAgent = mid(1, 1)
		rep.Calls = mid(n, n)
		lo.PromptTokens, hi.PromptTokens = n*prefix+tasks, n*prefix+tasks
		lo.CompletionTokens, hi.CompletionTokens = n*ans.Low, n*ans.High
		prefLo, prefHi = n*prefix, n*prefix
	}
	rep.PromptTokens = mid(lo.PromptTokens, hi.PromptTokens)
	shared := mid(prefLo, prefHi)
	rep.SharedPrefix = &shared
	rep.CompletionTokens = mid(lo.CompletionTokens, hi.CompletionTokens)
	if rep.Price != nil {
		c := costSpan{Low: rep.Price.cost(lo), High: rep.Price.cost(hi)}
		c.Estimate = (c.Low + c.High) / 2
		rep.Cost = &c
	}
	return rep
}

// answerTokens returns the tokens of an agent's final answer: the output
// schema's short and long answer (schemaAnswers), else freeTextLow to
// freeTextHigh; at most the job's max_tokens.
func (d *dryRun) answerTokens() span {
	lo, hi := int64(freeTextLow), int64(freeTextHigh)
	if s := d.r.spec.Schema(); s != nil {
		if short, long, err := schemaAnswers(s.Raw()); err == nil {
			lo, hi = int64(d.counter.Text(short)), int64(d.counter.Text(long))
		}
	}
	if mt := int64(d.r.spec.Def().MaxTokens); mt > 0 {
		lo, hi = min(lo, mt), min(hi, mt)
	}
	return mid(max(lo, 1), max(hi, 1))
}

// mid returns the span from lo to hi with their midpoint as estimate.
func mid(lo, hi int64) span { return span{Estimate: (lo + hi) / 2, Low: lo, High: hi} }

// spread returns the smallest, median and largest task tokens.
func (st *dryStats) spread() spread {
	if st.ok == 0 {
		return spread{}
	}
	keys := slices.Sorted(maps.Keys(st.tasks))
	s := spread{Min: int64(keys[0]), Max: int64(keys[len(keys)-1])}
	seen, half := 0, (st.ok+1)/2
	for _, k := range keys {
		if seen += st.tasks[k]; seen >= half {
			s.Median = int64(k)
			break
		}
	}
	return s
}

// fromSample replaces the estimate with one scaled from the sampled
// agents' measured calls, tokens and cost: all the valid inputs at the
// sample's median per agent, low and high at its smallest and largest.
func (rep *dryReport) fromSample(results []batchagent.Result, price jobPrice) {
	rep.Method, rep.Sampled = "sample", len(results)
	rep.AnswerTokens, rep.SharedPrefix = nil, nil
	if len(results) == 0 {
		return
	}
	n := int64(rep.InputsOK)
	scaled := func(per func(batchagent.Result) int64) span {
		vs := make([]int64, len(results))
		for i, r := range results {
			vs[i] = per(r)
		}
		slices.Sort(vs)
		return span{Estimate: n * vs[(len(vs)-1)/2], Low: n * vs[0], High: n * vs[len(vs)-1]}
	}
	calls := func(r batchagent.Result) int64 { return int64(r.ModelCalls) }
	rep.Calls = scaled(calls)
	rep.CallsPerAgent = span{Estimate: rep.Calls.Estimate / n, Low: rep.Calls.Low / n, High: rep.Calls.High / n}
	rep.PromptTokens = scaled(func(r batchagent.Result) int64 { return r.Usage.PromptTokens })
	cached := scaled(func(r batchagent.Result) int64 { return r.Usage.CachedTokens })
	rep.CachedTokens = &cached
	rep.CompletionTokens = scaled(func(r batchagent.Result) int64 { return r.Usage.CompletionTokens })
	if !price.known {
		return
	}
	costs := make([]float64, len(results))
	var spent float64
	for i, r := range results {
		costs[i] = price.price.Cost(r.Usage)
		spent += costs[i]
	}
	slices.Sort(costs)
	f := float64(n)
	rep.Cost = &costSpan{Estimate: f * costs[(len(costs)-1)/2], Low: f * costs[0], High: f * costs[len(costs)-1]}
	rep.SampleCost = &spent
}

// write prints rep as a table.
func (rep *dryReport) write(w io.Writer) {
	fmt.Fprintf(w, "dry run of %s: %d inputs in %s: %d ok, %d bad\n", rep.Job, rep.InputsOK+rep.InputsBad, rep.Inputs, rep.InputsOK, rep.InputsBad)
	fmt.Fprintf(w, "prompt: shared prefix %s tokens, sent by every call; task %s / %s / %s tokens per input (min / median / max)\n",
		thousands(int64(rep.SharedPrefixTokens)), thousands(rep.TaskTokens.Min), thousands(rep.TaskTokens.Median), thousands(rep.TaskTokens.Max))
	switch {
	case rep.Method == "sample":
		fmt.Fprintf(w, "method: sample of %d inputs run for real, evenly spread, scaled to %d inputs (median per agent; low, high: the smallest, the largest)\n", rep.Sampled, rep.InputsOK)
	default:
		how := "1 call per agent"
		switch {
		case rep.tools:
			how = fmt.Sprintf("%d-%d calls per agent (tools; max_turns %d)", rep.CallsPerAgent.Low, rep.CallsPerAgent.High, rep.maxTurns)
		case rep.pack:
			how = fmt.Sprintf("packed calls of up to %d agents, each sending the shared prefix once", rep.packSize)
		}
		fmt.Fprintf(w, "method: output schema, no model call: answers of %s-%s tokens, %s\n", thousands(rep.AnswerTokens.Low), thousands(rep.AnswerTokens.High), how)
	}
	fmt.Fprintln(w)
	row := func(name string, s span) {
		fmt.Fprintf(w, "%-22s %14s %14s %14s\n", name, thousands(s.Estimate), thousands(s.Low), thousands(s.High))
	}
	fmt.Fprintf(w, "%-22s %14s %14s %14s\n", "", "estimate", "low", "high")
	row("calls", rep.Calls)
	row("prompt tokens", rep.PromptTokens)
	if rep.SharedPrefix != nil {
		row("  of which prefix", *rep.SharedPrefix)
	}
	if rep.CachedTokens != nil {
		row("  of which cached", *rep.CachedTokens)
	}
	row("completion tokens", rep.CompletionTokens)
	if rep.Cost != nil {
		fmt.Fprintf(w, "%-22s %14s %14s %14s\n", "cost", dollars(rep.Cost.Estimate), dollars(rep.Cost.Low), dollars(rep.Cost.High))
	}
	fmt.Fprintln(w)
	if rep.Price == nil {
		fmt.Fprintln(w, rep.unknownPrice)
		return
	}
	p := rep.Price
	of := ""
	if rep.Model != "" {
		of = " of " + rep.Model
	}
	fmt.Fprintf(w, "price%s: $%g input, $%g cached input, $%g output per million tokens (prices: %s)\n", of, p.Input, p.CachedInput, p.Output, rep.PriceSource)
	if d := p.BatchDiscount; d > 0 && rep.Cost != nil {
		// batchagent calls the model in real time: the provider's batch
		// price is what the same tokens would cost through its batch API.
		f := 1 - d
		fmt.Fprintf(w, "through the provider's batch API (%g%% off) the same tokens would cost %s (%s to %s)\n",
			d*100, dollars(rep.Cost.Estimate*f), dollars(rep.Cost.Low*f), dollars(rep.Cost.High*f))
	}
	if rep.SampleCost != nil {
		fmt.Fprintf(w, "the sample cost %s\n", dollars(*rep.SampleCost))
	}
}

// shownPath returns path relative to the working directory when it is
// below it, else as it is.
func shownPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}

// thousands renders n with thousands separators: 1,234,567.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dollars renders a cost: two decimals from $100, six below a cent, four
// between.
func dollars(c float64) string {
	switch {
	case c >= 100:
		return fmt.Sprintf("$%.2f", c)
	case c < 0.01:
		return fmt.Sprintf("$%.6f", c)
	}
	return fmt.Sprintf("$%.4f", c)
}
