package agent

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// State is one agent's progress: the unit that is checkpointed and
// resumed. The zero value is not runnable: Messages must hold the task.
type State struct {
	// JobID names the job the agent belongs to.
	JobID string `json:"job_id,omitempty"`
	// Index is the agent's position in its job's inputs.
	Index int `json:"index"`
	// Input is the agent's input.
	Input job.Input `json:"input,omitempty"`
	// Status is where the agent stands: running, done or failed.
	Status Status `json:"status"`
	// Failure is the error of a failed agent, as saved data: its kind,
	// step, turn, cause chain and schema problems; nil for none. The engine
	// fills it with the final state ([State.Finish]); [State.Result]
	// rebuilds the error from it.
	Failure *job.Failure `json:"failure,omitempty"`
	// Messages is the conversation without the shared prefix.
	Messages []llm.Message `json:"messages"`
	// Media are the references of the media the agent's task read from
	// files or fetched URLs (the job's media fields, as its loader
	// returned them): Kind, Ref and Hash only, never bytes. A checkpoint
	// saves the parts of Messages they name without their bytes and, on
	// resume, reads them again through the job's MediaLoader, comparing
	// the hash: a different one is a changed input. Final states keep
	// them (a store may drop their Messages), so that a resumed run can
	// tell a changed file from an unchanged one. Media passed by URL to
	// the provider, data: URLs and tool results' media are not listed: a
	// URL is its own reference, and a data: URL or a tool's result is
	// saved as it is. Nil: none.
	Media []llm.Part `json:"media,omitempty"`
	// Turns counts completed model turns.
	Turns int `json:"turns"`
	// ModelCalls counts model call attempts, retries included.
	ModelCalls int `json:"model_calls"`
	// Retries counts model calls retried after transient errors.
	Retries int `json:"retries"`
	// Corrections counts invalid answers sent back for correction.
	Corrections int `json:"corrections"`
	// ToolCalls counts tool calls requested by the model.
	ToolCalls int `json:"tool_calls"`
	// ToolErrors counts the tool calls that returned an error: each went
	// back to the model as an error result, unless it was fatal.
	ToolErrors int `json:"tool_errors,omitempty"`
	// Repairs counts fixes made to broken JSON answers (a trailing comma,
	// a fence, brackets left open by a cut-off answer).
	Repairs int `json:"repairs,omitempty"`
	// Truncations counts answers cut off at the token cap (finish reason
	// length), each asked again or, the last, failed.
	Truncations int `json:"truncations,omitempty"`
	// Compactions counts the times the conversation was compacted to fit
	// the model's context window: older tool results shortened, older
	// turns dropped (see Config.ContextWindow).
	Compactions int `json:"compactions,omitempty"`
	// CachedCalls counts the agent's model calls answered from a response
	// cache, and SavedTokens the tokens those answers had cost, over all
	// its runs. The agent's loop does not know which answers came from a
	// cache: what installs the cache keeps them (a run's checkpointer adds
	// the calls since the state was loaded), so that a resumed agent's
	// result counts the cached calls of its earlier runs too.
	CachedCalls int   `json:"cached_calls,omitempty"`
	SavedTokens int64 `json:"saved_tokens,omitempty"`
	// MaxTokens is the token cap raised after a truncated answer, used by
	// the agent's later calls, kept between the configured MaxTokens and
	// MaxTokensLimit; zero means the configured one.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Usage sums the tokens of all model calls.
	Usage llm.Usage `json:"usage"`
	// Timings accumulates where the agent's time went.
	Timings Timings `json:"timings"`
	// Output is the validated final answer (compact JSON), once done.
	Output json.RawMessage `json:"output,omitempty"`
	// Raw is the last final answer's text as the model wrote it.
	Raw string `json:"raw,omitempty"`
	// Tier is the fallback tier that answered a finished agent (0: the
	// job's model), and Packed the agents of the packed call that
	// answered it (0: none); set by the engine with the final state.
	Tier   int `json:"tier,omitempty"`
	Packed int `json:"packed,omitempty"`
	// Started is when the agent began in its latest run (the engine sets
	// it as the agent starts or resumes); zero when unknown, as in states
	// saved before it was recorded.
	Started time.Time `json:"started,omitzero"`
	// Spans are the agent's model turns as they ran, in order: Run
	// appends one per model turn, a failed one included, up to
	// job.MaxSpans, and a resumed agent keeps those of its earlier runs.
	Spans []job.Span `json:"spans,omitempty"`
}

// Status is where an agent stands.
type Status string

// The statuses of an agent.
const (
	StatusRunning Status = "running" // turns in progress; resumable from Messages
	StatusDone    Status = "done"    // finished with a valid output
	StatusFailed  Status = "failed"  // finished with an error
)

// Timings says where an agent's time went.
type Timings struct {
	// Queue is time spent waiting for an inference slot.
	Queue time.Duration `json:"queue"`
	// Inference is time spent in model calls, slot held.
	Inference time.Duration `json:"inference"`
	// Tools is time spent on tool calls: per turn, from the first call's
	// start to the last one's end. Calls that start while the answer
	// still streams make it overlap Inference.
	Tools time.Duration `json:"tools"`
	// Backoff is time spent waiting before retries.
	Backoff time.Duration `json:"backoff"`
	// TTFT is the time from the sending of the first answered model call
	// (after its slot wait, which is Queue's) to its first token.
	TTFT time.Duration `json:"ttft"`
	// Total is the agent's wall time in the run that finished it, set by
	// the engine with its final state. Zero while the agent runs.
	Total time.Duration `json:"total,omitempty"`
}

// Clone returns a deep copy of the conversation and counters of st.
func (st *State) Clone() *State {
	c := *st
	c.Messages = slices.Clone(st.Messages)
	c.Media = slices.Clone(st.Media)
	c.Output = slices.Clone(st.Output)
	c.Failure = st.Failure.Clone()
	c.Spans = slices.Clone(st.Spans)
	return &c
}

// Finish records r, the result of the agent whose state st is, as st's
// final state: status done or failed, the failure as saved data (see
// [job.FailureOf]), the tier, the pack size and the total time.
func (st *State) Finish(r *job.Result) {
	st.Timings.Total = r.Timings.Total // for export: a result line's total_s
	st.Tier, st.Packed = r.Tier, r.Packed
	if r.Err == nil {
		st.Status = StatusDone
		return
	}
	st.Status = StatusFailed
	st.Failure = job.FailureOf(r.Err)
}

// Result rebuilds the result of a finished agent of job jobID from its
// saved state, as a resumed run and `batchagent export` report it: output,
// counters, usage, timings, start, spans, tier and pack size; for a
// failed agent, the raw answer and the error rebuilt from Failure (see
// [job.Failure.AgentError]) instead of an output.
func (st *State) Result(jobID string) job.Result {
	t := st.Timings
	r := job.Result{
		Index: st.Index, Input: st.Input, Output: st.Output, ModelCalls: st.ModelCalls, Turns: st.Turns,
		ToolCalls: st.ToolCalls, ToolErrors: st.ToolErrors, Repairs: st.Repairs, Truncations: st.Truncations, Compactions: st.Compactions, Usage: st.Usage,
		CachedCalls: st.CachedCalls, SavedTokens: st.SavedTokens,
		Timings: job.Timings{Queue: t.Queue, Inference: t.Inference, Tools: t.Tools, Backoff: t.Backoff, TTFT: t.TTFT, Total: t.Total},
		Started: st.Started, Spans: st.Spans, Tier: st.Tier, Packed: st.Packed,
	}
	if st.Status == StatusFailed {
		r.Raw = st.Raw // kept on failure only, as a fresh result keeps it
		r.Err = st.Failure.AgentError(jobID, st.Index, st.Raw)
		r.Output = nil
	}
	return r
}

// UnmarshalJSON decodes a state as encoding/json does without it, but
// with the numbers of Input as json.Number whatever the decoder's setting
// (as every Checkpointer must restore them), and reads a state saved
// before failures were kept as a Failure too: the err_kind, err_msg,
// err_op, err_turn, err_class and problems members of such a state make
// its Failure. A decoder calls it with the state's JSON once scanned, so
// the state is read twice: [DecodeState] reads it once.
func (st *State) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return DecodeState(dec, st)
}

// DecodeState reads the next JSON value of dec into st as
// [State.UnmarshalJSON] does (a state in any format this version reads),
// in one pass, numbers as dec's UseNumber says: dec.Decode(st) would
// call UnmarshalJSON, which decodes the state's JSON again.
func DecodeState(dec *json.Decoder, st *State) error {
	type plain State // State without UnmarshalJSON
	v := struct {
		*plain
		legacyFailure
	}{plain: (*plain)(st)}
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if st.Failure == nil {
		st.Failure = v.legacyFailure.failure()
	}
	return nil
}

// legacyFailure is the failure of a state saved before [job.Failure], in
// six members.
type legacyFailure struct {
	ErrKind  string           `json:"err_kind"`
	ErrMsg   string           `json:"err_msg"`
	ErrOp    string           `json:"err_op"`
	ErrTurn  int              `json:"err_turn"`
	ErrClass string           `json:"err_class"`
	Problems []schema.Problem `json:"problems"`
}

// failure returns l as a Failure: a cause chain of one link, the message
// and classes saved; nil when the state had no failure.
func (l *legacyFailure) failure() *job.Failure {
	if l.ErrKind == "" && l.ErrMsg == "" && l.ErrOp == "" && l.ErrTurn == 0 && l.ErrClass == "" && len(l.Problems) == 0 {
		return nil
	}
	return &job.Failure{Kind: job.Kind(l.ErrKind), Op: l.ErrOp, Turn: l.ErrTurn,
		Cause: []job.Link{{Message: l.ErrMsg, Class: l.ErrClass}}, Problems: l.Problems}
}

// MediaRef returns the reference of st's task media that p, a part of one
// of st's messages, was loaded from: the entry of st.Media with p's Ref
// and Hash. It reports false for a part no entry names (text, a URL, a
// data: URL, a tool result's media), which a checkpoint keeps as it is.
func (st *State) MediaRef(p *llm.Part) (llm.Part, bool) {
	if p.Ref == "" || p.Hash == "" || p.Kind == llm.PartText {
		return llm.Part{}, false
	}
	for _, m := range st.Media {
		if m.Ref == p.Ref && m.Hash == p.Hash && m.Kind == p.Kind {
			return m, true
		}
	}
	return llm.Part{}, false
}

// MediaRefs returns the references of parts, which are media loaded for
// st's task: Kind, Ref and Hash of each part that has a Ref and a Hash
// (what was read from a file or a fetched URL); nil when none has.
func MediaRefs(parts []llm.Part) []llm.Part {
	var out []llm.Part
	for i := range parts {
		p := &parts[i]
		if p.Kind == llm.PartText || p.Ref == "" || p.Hash == "" {
			continue
		}
		out = append(out, llm.Part{Kind: p.Kind, Ref: p.Ref, Hash: p.Hash})
	}
	return out
}

// SavedParts returns parts, those of one of s's messages, as a checkpoint
// keeps them: each part that s.Media names ([State.MediaRef]: a file or
// fetched URL the job's media loader reads again on resume) loses its
// bytes, its path and hash kept in their stead; other parts (data: URLs,
// media returned by tools) are kept whole. It returns parts itself when
// none loses its bytes.
func (s *State) SavedParts(parts []llm.Part) []llm.Part {
	if len(s.Media) == 0 {
		return parts
	}
	var out []llm.Part
	for i := range parts {
		if _, ok := s.MediaRef(&parts[i]); !ok || parts[i].Data == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(parts)
		}
		out[i].Data = nil
	}
	if out == nil {
		return parts
	}
	return out
}

// SavedMessages returns s.Messages with each message's parts as
// [State.SavedParts] keeps them. It returns s.Messages itself when no part
// loses its bytes, and copies only the messages it changes.
func (s *State) SavedMessages() []llm.Message {
	if len(s.Media) == 0 {
		return s.Messages
	}
	var out []llm.Message
	for i := range s.Messages {
		parts := s.Messages[i].Parts
		saved := s.SavedParts(parts)
		if len(parts) == 0 || &saved[0] == &parts[0] {
			continue
		}
		if out == nil {
			out = slices.Clone(s.Messages)
		}
		out[i].Parts = saved
	}
	if out == nil {
		return s.Messages
	}
	return out
}
