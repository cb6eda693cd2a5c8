package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/schema"
)

// Defaults of the pack scenario.
const (
	// DefaultPackN is the pack scenario's number of tasks, and the
	// cached-slots profile's.
	DefaultPackN = 2000
	// PackMaxAgents is the packed mode's Pack.MaxAgents, and the auto
	// mode's.
	PackMaxAgents = 20
	// DefaultOneSlotN is the one-slot profile's number of tasks: one at a
	// time at about 0.3 s each, 200 unpacked tasks take a minute.
	DefaultOneSlotN = 200
	// DefaultRPMLimitedN is the rpm-limited profile's number of tasks:
	// paced at 600 requests a minute, 600 unpacked tasks take a minute.
	// Packing's gain grows with N (unpacked time grows by 0.1 s a task,
	// packed time hardly): at 300 tasks auto measured 3.8×, at 600 5.7×.
	DefaultRPMLimitedN = 600
)

// DefaultPackVerify is PackOptions.Verify when a position bias is set:
// the auto mode checks this share of its packed answers.
const DefaultPackVerify = 0.05

// PackSizes are the fixed pack sizes a profile's run compares: modes
// "fixed-5", "fixed-10" and "fixed-20".
var PackSizes = []int{5, 10, 20}

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
	// Profile names the server (simhttp.Profiles). Empty means the
	// scenario of modes "unpacked" and "packed" on the cached-slots
	// server; a profile runs modes "unpacked", "auto" (Pack.Auto, up to
	// PackMaxAgents) and "fixed-K" for each of PackSizes. The server's
	// queue is unbounded whatever the profile's, so that only its
	// slots, cache, overhead and rate limits shape the run.
	Profile string
	// Modes picks modes of a profile's run, in their order. Empty means
	// all.
	Modes []string
	// PositionBias is the simulator's sim.Config.PositionBias for packed
	// answers, in [0, 1]. Defaults to 0.
	PositionBias float64
	// Verify is the auto mode's Pack.Verify: the share of packed answers
	// checked against their tasks run alone. Defaults to
	// DefaultPackVerify when PositionBias is set, else 0.
	Verify float64
	// Seed seeds the simulator. Defaults to 1.
	Seed uint64
	// JSON prints one JSON object per mode instead of a line.
	JSON bool
}

// packDefaultN is the number of tasks of a profile when -n is not given.
func packDefaultN(profile string) int {
	switch profile {
	case simhttp.ProfileOneSlot:
		return DefaultOneSlotN
	case simhttp.ProfileRPMLimited:
		return DefaultRPMLimitedN
	}
	return DefaultPackN
}

// packModes are the modes of a profile's run, in order.
func packModes() []string {
	modes := []string{"unpacked", "auto"}
	for _, k := range PackSizes {
		modes = append(modes, fmt.Sprintf("fixed-%d", k))
	}
	return modes
}

// packSize is the Pack.MaxAgents of a mode: 0 unpacked.
func packSize(mode string) int {
	switch mode {
	case "unpacked":
		return 0
	case "packed", "auto":
		return PackMaxAgents
	}
	var k int
	fmt.Sscanf(mode, "fixed-%d", &k)
	return k
}

// PackReport is one mode of the pack scenario.
type PackReport struct {
	Scenario string `json:"scenario"`
	// Profile is the server profile; empty without one.
	Profile string `json:"profile,omitempty"`
	// Mode is "unpacked" (a model call per task), "packed" (up to
	// PackMaxAgents tasks a call), and with a profile "auto" (Pack.Auto up
	// to PackMaxAgents) or "fixed-K" (up to K tasks a call).
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
	// Speedup, on a profile's auto line, is the unpacked wall time ÷
	// auto's.
	Speedup *float64 `json:"speedup,omitempty"`
	// PackSizes counts the requests the server queued by the tasks each
	// carried ("1": a task alone, "10": a pack of ten), as the simulator
	// read them from the requests: the sizes the mode chose.
	PackSizes map[string]int64 `json:"pack_sizes,omitempty"`
	// PositionBias is the simulator's position bias; Biased counts the
	// packed entries it made wrong (valid, but not the task's answer
	// alone).
	PositionBias float64 `json:"position_bias,omitempty"`
	Biased       int64   `json:"biased,omitempty"`
	// Verified and Agreement, on an auto line with Verify set: the packed
	// answers checked against their tasks run alone, and the share of
	// them that agreed.
	Verified  int64    `json:"verified,omitempty"`
	Agreement *float64 `json:"agreement,omitempty"`
	// HTTP429 counts the requests the server answered 429 for its rate
	// limits.
	HTTP429 int64 `json:"http_429,omitempty"`
}

// RunPack runs the pack scenario: N tiny classification tasks against
// the HTTP simulator through the OpenAI backend, each mode on a fresh
// server. Without a profile: unpacked, then packed, on the cached-slots
// server (continuous batching, prefix cache). With one: unpacked, auto
// and the fixed sizes on the profile's server; N defaults to the
// profile's (DefaultPackN, DefaultOneSlotN, DefaultRPMLimitedN).
func RunPack(ctx context.Context, opt PackOptions, w io.Writer) ([]PackReport, error) {
	if opt.N < 0 || !(opt.Corrupt >= 0 && opt.Corrupt <= 1) || !(opt.PositionBias >= 0 && opt.PositionBias <= 1) {
		return nil, errors.New("bench: pack wants -n ≥ 0, and --corrupt and --position-bias in [0, 1]")
	}
	modes := []string{"unpacked", "packed"}
	if opt.Profile != "" {
		if _, err := simhttp.Profile(opt.Profile); err != nil {
			return nil, fmt.Errorf("bench: pack --profile: %w", err)
		}
		all := packModes()
		modes = all
		if len(opt.Modes) > 0 {
			modes = opt.Modes
			for _, m := range modes {
				if !slices.Contains(all, m) {
					return nil, fmt.Errorf("bench: pack: unknown mode %q (known: %s)", m, strings.Join(all, ", "))
				}
			}
		}
	} else if len(opt.Modes) > 0 {
		return nil, errors.New("bench: pack: modes are chosen with a --profile only")
	}
	if opt.N == 0 {
		opt.N = packDefaultN(opt.Profile)
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if !(opt.Verify >= 0 && opt.Verify <= 1) {
		return nil, errors.New("bench: pack wants a verify share in [0, 1]")
	}
	if opt.Verify == 0 && opt.PositionBias > 0 {
		opt.Verify = DefaultPackVerify
	}
	var reports []PackReport
	var unpacked *PackReport
	for _, mode := range modes {
		r, err := packRun(ctx, opt, mode)
		if err != nil {
			return reports, err
		}
		if mode == "unpacked" {
			unpacked = &r
		} else if u := unpacked; u != nil {
			r.CallsRatio = ptr(float64(u.LLMCalls) / float64(max(r.LLMCalls, 1)))
			r.PromptTokensRatio = ptr(float64(u.PromptTokens) / float64(max(r.PromptTokens, 1)))
			r.WallRatio = ptr(r.WallS / u.WallS)
			if mode == "auto" {
				r.Speedup = ptr(u.WallS / r.WallS)
			}
		}
		reports = append(reports, r)
		if opt.JSON {
			out, _ := json.Marshal(r)
			fmt.Fprintln(w, string(out))
			continue
		}
		fmt.Fprintf(w, "pack %s%-9s n=%d  wall %.2fs  first result %.3fs  llm_calls %d  prompt_tokens %d  cached %.0f%%  ok %d  failed %d  packed %d  alone %d",
			profilePrefix(r.Profile), r.Mode, r.N, r.WallS, r.FirstResultS, r.LLMCalls, r.PromptTokens, 100*r.CachedShare, r.OK, r.Failed, r.Packed, r.PackAlone)
		if r.CallsRatio != nil {
			fmt.Fprintf(w, "  calls ÷%.1f  prompt tokens ÷%.1f  wall ×%.2f", *r.CallsRatio, *r.PromptTokensRatio, *r.WallRatio)
		}
		if r.Speedup != nil {
			fmt.Fprintf(w, "  speedup %.2f", *r.Speedup)
		}
		if r.Profile != "" {
			fmt.Fprintf(w, "  sizes %v", r.PackSizes)
		}
		if r.Biased > 0 {
			fmt.Fprintf(w, "  biased %d", r.Biased)
		}
		if r.Agreement != nil {
			fmt.Fprintf(w, "  agreement %.3f of %d checked", *r.Agreement, r.Verified)
		}
		fmt.Fprintln(w)
	}
	return reports, nil
}

// profilePrefix is a profile's name and a space, for a text line.
func profilePrefix(profile string) string {
	if profile == "" {
		return ""
	}
	return profile + " "
}

// packRun runs one mode against a fresh server.
func packRun(ctx context.Context, opt PackOptions, mode string) (PackReport, error) {
	r := PackReport{Scenario: "pack", Profile: opt.Profile, Mode: mode, N: opt.N}
	size := packSize(mode)
	mcfg := sim.Config{ToolTurns: -1, Seed: opt.Seed}
	if size > 0 {
		mcfg.CorruptRate, mcfg.PositionBias = opt.Corrupt, opt.PositionBias
		r.Corrupt, r.PositionBias = opt.Corrupt, opt.PositionBias
	}
	var scfg simhttp.Config
	if opt.Profile != "" {
		var err error
		if scfg, err = simhttp.Profile(opt.Profile); err != nil {
			return r, err
		}
	}
	scfg.Model, scfg.MaxQueue = mcfg, -1
	srv, m, stop, err := serveSim(ctx, scfg)
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
	if size > 0 {
		d.Pack = batchagent.Pack{MaxAgents: size, Auto: mode == "auto"}
		if mode == "auto" {
			d.Pack.Verify = opt.Verify
		}
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
	r.HTTP429 = ss.RateLimited
	r.Biased = srv.ModelStats().Biased
	if opt.Profile != "" {
		r.PackSizes = map[string]int64{}
		for k, n := range srv.PackSizes() {
			r.PackSizes[strconv.Itoa(k)] = n
		}
	}
	r.PromptTokens, r.CompletionTokens = st.Usage.PromptTokens, st.Usage.CompletionTokens
	if r.PromptTokens > 0 {
		r.CachedShare = float64(st.Usage.CachedTokens) / float64(r.PromptTokens)
	}
	r.Packed, r.PackAlone = st.Packed, st.PackAlone
	if d.Pack.Verify > 0 {
		r.Verified = st.PackVerified
		if st.PackVerified > 0 {
			r.Agreement = ptr(float64(st.PackAgreed) / float64(st.PackVerified))
		}
	}
	return r, ctx.Err()
}
