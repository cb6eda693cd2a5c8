package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batchagent/batchagent/llm"
)

// Context compaction keeps a long conversation inside the model's context
// window. Sizes are estimated, not counted: package agent has no tokenizer
// (it may not import internal/tokens), and an estimate of bytes/4 plus a
// few tokens a message costs one pass over the lengths, which is all a
// turn far from the window pays. Where the estimate is low the server says
// so (llm.ErrContextLength), and the agent learns the window from that.
//
// Compaction rewrites State.Messages rather than only the request: later
// prompts stay small without compacting again, and a checkpoint holds the
// conversation the model actually saw.
const (
	// bytesPerToken is the estimate's tokenizer: a token is 4 bytes.
	bytesPerToken = 4
	// messageTokens and callTokens are the estimate's overhead of a
	// message (role, delimiters) and of a tool call (ID, framing).
	messageTokens = 8
	callTokens    = 12
	// triggerPercent: a request whose estimated prompt plus answer reserve
	// is above this share of the window is compacted first; targetPercent
	// is the share that shortening tool results aims for, so that
	// compaction happens every few turns, not on each.
	triggerPercent = 85
	targetPercent  = 60
	// excerptHead and excerptTail are the bytes of a shortened tool
	// result kept from its start and its end.
	excerptHead = 128
	excerptTail = 64
	// maxRelearn bounds how often one model call is compacted and sent
	// again after the server refused its length.
	maxRelearn = 3
)

// compactedMark starts what compaction writes: the marker inside a
// shortened tool result and the note that stands for dropped turns.
const compactedMark = "[compacted: "

// ContextError reports a conversation that does not fit the model's
// context window even with every older tool result shortened and every
// older turn dropped: the task, the shared prefix, the latest turn and the
// answer's token reserve alone are too large. It wraps
// [llm.ErrContextLength]; no call was sent.
type ContextError struct {
	// Window is the context window in tokens, configured or learnt.
	Window int
	// Prompt is the estimated prompt after compaction, in tokens.
	Prompt int
	// Fixed is the part of Prompt compaction may not touch: the shared
	// prefix, the tool definitions and the task message.
	Fixed int
	// Task is the estimated size of the task message alone.
	Task int
	// Latest is the estimated size of the latest turn (the last assistant
	// message and the tool results and messages after it), which
	// compaction keeps whole; zero when the task is the only message.
	Latest int
	// Reserve is the tokens kept for the answer (the token cap).
	Reserve int
}

// Error names the sizes.
func (e *ContextError) Error() string {
	return fmt.Sprintf("prompt of ~%d tokens (task message ~%d, latest turn ~%d, shared prefix and tools ~%d) plus %d for the answer exceeds the context window of %d tokens, after compacting every older turn",
		e.Prompt, e.Task, e.Latest, e.Fixed-e.Task, e.Reserve, e.Window)
}

// Unwrap returns [llm.ErrContextLength].
func (e *ContextError) Unwrap() error { return llm.ErrContextLength }

// window returns the context window the agent keeps within, in estimate
// tokens: the configured one or the one learnt from the server, whichever
// is smaller; zero when neither is known.
func (r *Runner) window() int {
	w, l := r.cfg.ContextWindow, int(r.learnt.Load())
	if w == 0 || l > 0 && l < w {
		return l
	}
	return w
}

// reserve returns the tokens a request keeps for the answer: its token
// cap, or an eighth of the window when the backend's default applies.
func reserve(req *llm.Request, window int) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return window / 8
}

// fit returns req, or the request of st after compacting st.Messages when
// req's estimated prompt and answer reserve come near the window (see
// compact). It returns a *ContextError when the conversation cannot fit.
func (r *Runner) fit(st *State, req *llm.Request) (*llm.Request, error) {
	w := r.window()
	if w == 0 {
		return req, nil
	}
	res := reserve(req, w)
	if estimate(req)+res <= w*triggerPercent/100 {
		return req, nil
	}
	fixed := estimate(&llm.Request{Messages: req.Messages[:len(req.Messages)-len(st.Messages)], Tools: req.Tools, Output: req.Output})
	limit := w - res - fixed
	msgs, changed := compact(st.Messages, limit*targetPercent/100, limit*triggerPercent/100)
	if changed {
		st.Messages = msgs
		st.Compactions++
		req = r.Request(st)
	}
	if p := estimate(req); p+res > w {
		task, latest := 0, 0
		if len(st.Messages) > 0 {
			task = messageSize(&st.Messages[0])
		}
		for i := len(st.Messages) - 1; i > 0; i-- {
			if st.Messages[i].Role == llm.RoleAssistant {
				latest = size(st.Messages[i:])
				break
			}
		}
		return nil, &ContextError{Window: w, Prompt: p, Fixed: fixed + task, Task: task, Latest: latest, Reserve: res}
	}
	return req, nil
}

// relearn handles err, a refusal of req for its length: it learns a
// smaller window from the server's message (see learnWindow) and returns
// the request to send instead, compacted to fit it. After maxRelearn
// tries, or when the conversation cannot fit, it returns an error.
func (r *Runner) relearn(st *State, req *llm.Request, err error, tries *int) (*llm.Request, error) {
	if *tries >= maxRelearn {
		return nil, err
	}
	*tries++
	sent := estimate(req)
	var msg string
	if ae, ok := errors.AsType[*llm.APIError](err); ok {
		msg = ae.Message
	}
	w := learnWindow(msg, sent, req.MaxTokens)
	if cur := r.window(); cur > 0 && w >= cur {
		w = cur * 9 / 10 // the window is below what was sent: shrink anyway
	}
	for {
		old := r.learnt.Load()
		if old > 0 && old <= int64(w) || r.learnt.CompareAndSwap(old, int64(w)) {
			break
		}
	}
	next, ferr := r.fit(st, r.Request(st))
	if ferr != nil {
		return nil, fmt.Errorf("%w (the server said: %w)", ferr, err)
	}
	return next, nil
}

var (
	// windowSaid finds the window in OpenAI's, vLLM's and SGLang's
	// messages: "maximum context length is 4096 tokens".
	windowSaid = regexp.MustCompile(`(?i)maximum (?:context|model) length is (\d+)`)
	// promptSaid finds the prompt the server counted: OpenAI's "(3900 in
	// the messages, 512 in the completion)".
	promptSaid = regexp.MustCompile(`(\d+) in the messages`)
	// anthropicSaid is Anthropic's "prompt is too long: 210000 tokens >
	// 200000 maximum".
	anthropicSaid = regexp.MustCompile(`(\d+) tokens > (\d+) maximum`)
)

// learnWindow returns the context window, in estimate tokens, that a
// refusal's message msg implies for a request whose prompt was estimated
// at sent tokens with maxTokens for the answer. When the message states
// the window and the prompt the server counted, the window is scaled by
// the estimate's error; stated alone, it is taken as is when the request
// did exceed it by the estimate; otherwise the window is taken to be 90%
// of what was sent.
func learnWindow(msg string, sent, maxTokens int) int {
	var w, counted int
	if m := windowSaid.FindStringSubmatch(msg); m != nil {
		w = tokensSaid(m[1])
		if p := promptSaid.FindStringSubmatch(msg); p != nil {
			counted = tokensSaid(p[1])
		}
	} else if m := anthropicSaid.FindStringSubmatch(msg); m != nil {
		counted, w = tokensSaid(m[1]), tokensSaid(m[2])
	}
	guess := (sent + maxTokens) * 9 / 10
	switch {
	case w > 0 && counted > 0:
		// The server counted counted tokens where we estimated sent: keep
		// the answer's share, scale the prompt's.
		prompt := max(w-maxTokens, 0)
		return min(guess, prompt*sent/counted+maxTokens)
	case w > 0 && w < sent+maxTokens:
		return w
	default:
		return max(guess, 1)
	}
}

// estimate returns the estimated prompt tokens of req.
func estimate(req *llm.Request) int {
	n := 0
	for i := range req.Messages {
		n += messageSize(&req.Messages[i])
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		n += (len(t.Name)+len(t.Description)+len(t.Parameters))/bytesPerToken + messageTokens
	}
	if req.Output != nil {
		n += len(req.Output.Schema) / bytesPerToken
	}
	return n
}

// messageSize returns the estimated tokens of m: its text at
// bytesPerToken, and its media parts as providers bill them (partTokens).
func messageSize(m *llm.Message) int {
	b := len(m.Content) + len(m.Name) + len(m.ToolCallID)
	n := messageTokens
	if len(m.Parts) > 0 {
		n += partsSize(m.Parts)
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		b += len(c.ID) + len(c.Name) + len(c.Arguments)
		n += callTokens
	}
	return n + (b+bytesPerToken-1)/bytesPerToken
}

func size(msgs []llm.Message) int {
	n := 0
	for i := range msgs {
		n += messageSize(&msgs[i])
	}
	return n
}

// compact returns msgs (a conversation without the shared prefix, its
// task first) made to fit, by the estimate, target tokens if shortening
// older tool results to excerpts can, else limit tokens by shortening them
// to bare markers and then dropping older turns;
// changed reports whether anything was rewritten. msgs is not modified.
//
// The task (msgs[0]) and the latest turn (the last assistant message and
// what follows it) are kept whole. First the tool results before the
// latest turn are shortened to a head/tail excerpt with a marker, oldest
// first, until the conversation fits target; if it exceeds limit, they are
// shortened to the marker alone, oldest first. If it still exceeds limit,
// the oldest turns (an assistant message and the tool results and user
// messages that follow it) are dropped until it fits, and one user note
// after the task says how many were: every tool call left keeps its one
// result, so OpenAI, Anthropic and Bedrock accept the conversation. The
// result is deterministic, never larger than msgs, and may still exceed
// limit when the kept parts alone do.
func compact(msgs []llm.Message, target, limit int) (out []llm.Message, changed bool) {
	total := size(msgs)
	if total <= target || len(msgs) < 3 {
		return msgs, false
	}
	latest := len(msgs)
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			latest = i
			break
		}
	}
	out = msgs
	// Shorten to excerpts down to target, then to bare markers down to
	// limit.
	for _, pass := range []struct{ head, tail, goal int }{{excerptHead, excerptTail, target}, {0, 0, limit}} {
		for i := 1; i < latest && total > pass.goal; i++ {
			m := &out[i]
			if m.Role != llm.RoleTool {
				continue
			}
			text := m.Content
			if len(m.Parts) > 0 { // media go first: a note names them
				text = mediaNote(m)
			}
			short, ok := excerpt(text, pass.head, pass.tail)
			if !ok && len(m.Parts) == 0 {
				continue
			}
			if !changed {
				out, changed = append([]llm.Message(nil), msgs...), true
				m = &out[i]
			}
			before := messageSize(m)
			m.Content, m.Parts = short, nil
			total -= before - messageSize(m)
		}
	}
	if total <= limit {
		return out, changed
	}
	// Drop whole turns, oldest first, after the task and any earlier note.
	start := 1
	turns, calls := 0, 0
	if isNote(&out[start]) {
		turns, calls = noteCounts(out[start].Content)
		total -= messageSize(&out[start])
		start++
	}
	end := start // out[start:end] are dropped
	for end < latest && total > limit {
		if out[end].Role == llm.RoleAssistant {
			turns++
			calls += len(out[end].ToolCalls)
		}
		total -= messageSize(&out[end])
		end++
		for end < latest && out[end].Role != llm.RoleAssistant {
			total -= messageSize(&out[end])
			end++
		}
	}
	if end == start {
		return out, changed // nothing to drop
	}
	dropped := make([]llm.Message, 0, len(out)-(end-start)+2)
	dropped = append(dropped, out[0], llm.Message{Role: llm.RoleUser, Content: noteText(turns, calls)})
	dropped = append(dropped, out[end:]...)
	if size(dropped) >= size(out) {
		return out, changed // the note would cost what dropping saves
	}
	return dropped, true
}

// excerpt returns s shortened to its first head and last tail bytes
// around a marker saying how many bytes were left out; false when s is
// short enough already.
func excerpt(s string, head, tail int) (string, bool) {
	room := head + tail + 40 // the marker's length, and some
	if len(s) <= room {
		return s, false
	}
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail = len(s) - tail
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	var b strings.Builder
	b.Grow(room)
	b.WriteString(s[:head])
	b.WriteString("\n")
	b.WriteString(compactedMark)
	b.WriteString(groupDigits(tail - head))
	b.WriteString(" bytes omitted]\n")
	b.WriteString(s[tail:])
	return b.String(), true
}

// groupDigits writes n with thousands separators: 12,345.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// noteFormat is the note that stands for dropped turns.
const noteFormat = compactedMark + "%d earlier turns with %d tool calls omitted to fit the context window]"

func noteText(turns, calls int) string { return fmt.Sprintf(noteFormat, turns, calls) }

// isNote reports whether m is a note written by compact.
func isNote(m *llm.Message) bool {
	if m.Role != llm.RoleUser || !strings.HasPrefix(m.Content, compactedMark) {
		return false
	}
	var t, c int
	_, err := fmt.Sscanf(m.Content, noteFormat, &t, &c)
	return err == nil && m.Content == noteText(t, c)
}

// noteCounts returns the turns and calls a note counts.
func noteCounts(s string) (turns, calls int) {
	_, _ = fmt.Sscanf(s, noteFormat, &turns, &calls) // checked by isNote
	return turns, calls
}

// tokensSaid returns the count of tokens a server's message states in
// digits, or 0 (not stated) for one past any real model's (1<<30), which
// would overflow the window's arithmetic.
func tokensSaid(digits string) int {
	n, err := strconv.Atoi(digits)
	if err != nil || n > 1<<30 {
		return 0
	}
	return n
}
