package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/schema"
)

// Defaults of the pack scenario.
const (
	// DefaultPackN is the pack scenario's number of tasks.
	DefaultPackN = 2000
	// PackMaxAgents is the packed mode's Pack.MaxAgents.
	PackMaxAgents = 20
)

// packSchema is the answer of a classification task.
const packSchema = `{"type":"object","properties":{"label":{"type":"string","enum":["positive","negative","neutral"]}},"required":["label"],"additionalProperties":false}`

// packSystem is the shared prefix of the classification tasks: about 250
// tokens of guidelines.
var packSystem = rulesPrompt("You classify the sentiment of short product reviews for a shop's dashboard.\n",
	"label a review positive, negative or neutral from its text alone; mixed or factual reviews are neutral.", 1000)

// packWords are the words of the simulated reviews.
var packWords = strings.Fields("the kettle boils fast but the lid rattles and the handle gets warm; delivery was quick, " +
	"packaging was torn, colour as pictured, would buy again, stopped working after a week, great value for money")

// packReview is the text of review i: 14 words, drawn from packWords.
func packReview(i int) string {
	w := make([]string, 14)
	for k := range w {
		w[k] = packWords[(i*7+k*k*3+k)%len(packWords)]
	}
	return strings.Join(w, " ")
}

// PackOptions configures the pack scenario.
type PackOptions struct {
	// N is the number of tasks. Defaults to DefaultPackN.
	N int
	// Corrupt is the share of packed entries the simulator corrupts
	// (missing, invalid, duplicated or under an unknown id), in [0, 1].
	// Defaults to 0.
	Corrupt float64
	// Seed seeds the simulator. Defaults to 1.
	Seed uint64
	// JSON prints one JSON object per mode instead of a line.
	JSON bool
}

// PackReport is one mode of the pack scenario.
type PackReport struct {
	Scenario string `json:"scenario"`
	// Mode is "unpacked" (a model call per task) or "packed" (up to
	// PackMaxAgents tasks a call).
	Mode  string  `json:"mode"`
	N     int     `json:"n"`
	WallS float64 `json:"wall_s"`
	// FirstResultS is the time from the start to the first result.
	FirstResultS float64 `json:"first_result_s"`
	// LLMCalls counts the requests the server received; PromptTokens and
	// CompletionTokens the tokens it reported, CachedShare the share of
	// prompt tokens served from its prefix cache.
	LLMCalls         int64   `json:"llm_calls"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedShare      float64 `json:"cached_share"`
	// OK counts inputs that ended with exactly one result, valid against
	// the schema; Failed the others.
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	// Packed counts results answered by a packed call, PackAlone the
	// tasks that ran alone instead; Corrupt is the share of packed
	// entries the simulator corrupted.
	Packed    int64   `json:"packed"`
	PackAlone int64   `json:"pack_alone"`
	Corrupt   float64 `json:"corrupt"`
	// The packed line's ratios to the unpacked line: calls and prompt
	// tokens unpacked ÷ packed, wall time packed ÷ unpacked.
	CallsRatio        *float64 `json:"calls_ratio,omitempty"`
	PromptTokensRatio *float64 `json:"prompt_tokens_ratio,omitempty"`
	WallRatio         *float64 `json:"wall_ratio,omitempty"`
}

// RunPack runs the pack scenario: N tiny classification tasks against
// the HTTP simulator (continuous batching, prefix cache) through the
// OpenAI backend, first unpacked, then packed, each on a fresh server.
func RunPack(ctx context.Context, opt PackOptions, w io.Writer) ([]PackReport, error) {
	if opt.N < 0 || !(opt.Corrupt >= 0 && opt.Corrupt <= 1) {
		return nil, errors.New("bench: pack wants -n ≥ 0 and --corrupt in [0, 1]")
	}
	if opt.N == 0 {
		opt.N = DefaultPackN
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	var reports []PackReport
	for _, mode := range []string{"unpacked", "packed"} {
		r, err := packRun(ctx, opt, mode)
		if err != nil {
			return reports, err
		}
		if mode == "packed" {
			u := reports[0]
			r.CallsRatio = ptr(float64(u.LLMCalls) / float64(max(r.LLMCalls, 1)))
			r.PromptTokensRatio = ptr(float64(u.PromptTokens) / float64(max(r.PromptTokens, 1)))
			r.WallRatio = ptr(r.WallS / u.WallS)
		}
		reports = append(reports, r)
		if opt.JSON {
			out, _ := json.Marshal(r)
			fmt.Fprintln(w, string(out))
			continue
		}
		fmt.Fprintf(w, "pack %-9s n=%d  wall %.2fs  first result %.3fs  llm_calls %d  prompt_tokens %d  cached %.0f%%  ok %d  failed %d  packed %d  alone %d",
			r.Mode, r.N, r.WallS, r.FirstResultS, r.LLMCalls, r.PromptTokens, 100*r.CachedShare, r.OK, r.Failed, r.Packed, r.PackAlone)
		if r.CallsRatio != nil {
			fmt.Fprintf(w, "  calls ÷%.1f  prompt tokens ÷%.1f  wall ×%.2f", *r.CallsRatio, *r.PromptTokensRatio, *r.WallRatio)
		}
		fmt.Fprintln(w)
	}
	return reports, nil
}

// packRun runs one mode against a fresh server.
func packRun(ctx context.Context, opt PackOptions, mode string) (PackReport, error) {
	r := PackReport{Scenario: "pack", Mode: mode, N: opt.N}
	mcfg := sim.Config{ToolTurns: -1, Seed: opt.Seed}
	if mode == "packed" {
		mcfg.CorruptRate = opt.Corrupt
		r.Corrupt = opt.Corrupt
	}
	srv, m, stop, err := serveSim(ctx, simhttp.Config{Model: mcfg, MaxQueue: -1})
	if err != nil {
		return r, err
	}
	defer stop()
	sch, err := schema.Compile(json.RawMessage(packSchema))
	if err != nil {
		return r, err
	}
	d := batchagent.Def{
		ID:           "pack-" + mode,
		Model:        m,
		System:       packSystem,
		Task:         "Classify review {id}: {text}",
		OutputSchema: json.RawMessage(packSchema),
		MaxTokens:    1024,
		MaxRetries:   5,
	}
	if mode == "packed" {
		d.Pack = batchagent.Pack{MaxAgents: PackMaxAgents}
	}
	in := make([]batchagent.Input, opt.N)
	for i := range in {
		in[i] = batchagent.Input{"id": i, "text": packReview(i)}
	}
	seen := make([]int, opt.N)
	valid := make([]bool, opt.N)
	start := time.Now()
	var first time.Duration
	st, err := stream(ctx, batchagent.Config{MaxActive: opt.N, Admission: batchagent.Admission{WarmPrefix: true}}, d, batchagent.Slice(in),
		func(res batchagent.Result) error {
			if first == 0 {
				first = time.Since(start)
			}
			if res.Index < 0 || res.Index >= opt.N {
				return fmt.Errorf("bench: result for index %d of %d inputs", res.Index, opt.N)
			}
			seen[res.Index]++
			valid[res.Index] = res.Err == nil && sch.Validate(res.Output) == nil
			return nil
		})
	r.WallS = time.Since(start).Seconds()
	r.FirstResultS = first.Seconds()
	if err != nil {
		return r, err
	}
	for i := range seen {
		if seen[i] == 1 && valid[i] {
			r.OK++
		} else {
			r.Failed++
		}
	}
	ss := srv.Stats()
	r.LLMCalls = ss.Requests
	r.PromptTokens, r.CompletionTokens = st.Usage.PromptTokens, st.Usage.CompletionTokens
	if r.PromptTokens > 0 {
		r.CachedShare = float64(st.Usage.CachedTokens) / float64(r.PromptTokens)
	}
	r.Packed, r.PackAlone = st.Packed, st.PackAlone
	return r, ctx.Err()
}
