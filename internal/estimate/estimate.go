package estimate

import (
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
	// Inputs is the input file: CSV when its name ends in .csv, else
	// JSON lines. The caller has checked its format and placeholders.
	Inputs string
}

// Job is a prepared dry run: a job, its first request's layout and its
// inputs. A Job is not safe for concurrent use.
type Job struct {
	cfg     Config
	layout  *agent.Runner // builds the agents' requests; never runs
	counter *tokens.Counter
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
	if j.counter, err = tokens.New(def.ModelName); err != nil {
		return nil, err
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
	Shown   []BadLine   // the first BadShown bad inputs
	Prefix  int         // tokens of the shared prefix
	TaskSum int64       // tokens of the valid inputs' own messages
	tasks   map[int]int // the valid inputs by their own messages' tokens
}

// isCSV reports whether the input file is read as CSV.
func (j *Job) isCSV() bool { return strings.EqualFold(filepath.Ext(j.cfg.Inputs), ".csv") }

// items opens the input file and returns its items; the caller closes
// the file.
func (j *Job) items() (*os.File, batchagent.Inputs, error) {
	f, err := os.Open(j.cfg.Inputs)
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	decode := batchagent.JSONL
	if j.isCSV() {
		decode = batchagent.CSV
	}
	return f, decode(f, filepath.Base(j.cfg.Inputs)), nil
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
		n := j.counter.Count(&llm.Request{Messages: msgs})
		st.OK++
		st.TaskSum += int64(n)
		st.tasks[n]++
	}
	return st, j.findLines(st)
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
	if j.isCSV() {
		lineOf = input.LineCSV
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
		Job: j.cfg.Name, Inputs: j.cfg.Inputs, InputsOK: st.OK, InputsBad: st.Bad, Method: "schema",
		SharedPrefixTokens: st.Prefix, TaskTokens: st.spread(), Model: def.ModelName,
		MaxTurns: def.MaxTurns, Tools: spec.Pool() != nil, Pack: spec.Pack().On(), PackSize: spec.Pack().MaxAgents,
	}
	if p := price.Price; price.Known {
		cached := p.CachedInput
		if cached == 0 {
			cached = p.Input
		}
		rep.Price = &Rate{Input: p.Input, CachedInput: cached, Output: p.Output, BatchDiscount: p.BatchDiscount}
		rep.PriceSource = price.Source
	} else {
		rep.UnknownPrice = price.Summary(llm.Usage{})
	}
	ans := j.answerTokens()
	rep.AnswerTokens = &ans
	n, prefix, tasks := int64(st.OK), int64(st.Prefix), st.TaskSum
	var lo, hi llm.Usage
	var prefLo, prefHi int64
	switch {
	case rep.Tools:
		cLo, cHi := int64(min(2, rep.MaxTurns)), int64(rep.MaxTurns)
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
	case rep.Pack:
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
		c := CostSpan{Low: rep.Price.cost(lo), High: rep.Price.cost(hi)}
		c.Estimate = (c.Low + c.High) / 2
		rep.Cost = &c
	}
	return rep
}

// answerTokens returns the tokens of an agent's final answer: the output
// schema's short and long answer (schemaAnswers), else freeTextLow to
// freeTextHigh; at most the job's max_tokens.
func (j *Job) answerTokens() Span {
	lo, hi := int64(freeTextLow), int64(freeTextHigh)
	if s := j.cfg.Spec.Schema(); s != nil {
		if short, long, err := schemaAnswers(s.Raw()); err == nil {
			lo, hi = int64(j.counter.Text(short)), int64(j.counter.Text(long))
		}
	}
	if mt := int64(j.cfg.Spec.Def().MaxTokens); mt > 0 {
		lo, hi = min(lo, mt), min(hi, mt)
	}
	return mid(max(lo, 1), max(hi, 1))
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
