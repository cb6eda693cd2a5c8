package llm

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// ExtraFields is what a backend declares about the request fields that no
// [Request] member holds (a client's logprobs, top_k, vendor extras),
// carried in [Request.Extra].
type ExtraFields struct {
	// Verbatim: every extra field is sent to the server as it came
	// (OpenAI-compatible servers).
	Verbatim bool
	// Translated names the extra fields the backend translates into its
	// own API, separated by spaces (a string keeps Capabilities
	// comparable); any other is refused rather than dropped.
	Translated string
	// OneChoice: the server answers one choice whatever the request's n
	// (the simulator): a gateway asked for n > 1 makes n calls of it
	// rather than sending n on. A backend that does not send extra fields
	// verbatim answers one choice a call too.
	OneChoice bool
}

// Accepts reports whether the backend sends the extra field name on,
// verbatim or translated.
func (x ExtraFields) Accepts(name string) bool {
	return x.Verbatim || slices.Contains(strings.Fields(x.Translated), name)
}

// Extra is the members of an answer that no [Response] or [Event] member
// holds, as the backend sent them: Top those of the response object or
// stream chunk (system_fingerprint, service_tier, a vendor's fields) and
// Choice those of its choice (logprobs). JSON null members are left out.
// Choices holds the answer's other choices (index 1 and up, when the
// request asked for n > 1 in [Request.Extra]), each whole as the backend
// sent it: a choice object with its index and message (or, in a stream,
// its delta).
type Extra struct {
	Top     map[string]json.RawMessage `json:"top,omitempty"`
	Choice  map[string]json.RawMessage `json:"choice,omitempty"`
	Choices []json.RawMessage          `json:"choices,omitempty"`
}

// Merge folds o, a later piece of the same answer, into x. A member of
// the choice is merged with its earlier pieces: arrays (logprobs'
// content) concatenated, objects merged member by member, any other
// value replaced. A member of the answer itself (system_fingerprint,
// llama.cpp's timings) is the same in every chunk, or its latest value
// is the whole one: it is replaced.
func (x *Extra) Merge(o *Extra) {
	if o == nil {
		return
	}
	if len(o.Top) > 0 && x.Top == nil {
		x.Top = make(map[string]json.RawMessage, len(o.Top))
	}
	maps.Copy(x.Top, o.Top)
	x.Choice = mergeMembers(x.Choice, o.Choice)
	x.Choices = append(x.Choices, o.Choices...)
}

// Empty reports whether x holds no member.
func (x *Extra) Empty() bool { return x == nil || len(x.Top)+len(x.Choice)+len(x.Choices) == 0 }

func mergeMembers(dst, src map[string]json.RawMessage) map[string]json.RawMessage {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]json.RawMessage, len(src))
	}
	for _, k := range slices.Sorted(maps.Keys(src)) {
		dst[k] = mergeValue(dst[k], src[k])
	}
	return dst
}

// MergeMember returns b, a later piece of a choice's member a (logprobs),
// merged with a as [Extra.Merge] merges them.
func MergeMember(a, b json.RawMessage) json.RawMessage { return mergeValue(a, b) }

// mergeValue returns a followed by b: two arrays concatenated, two
// objects merged, else b.
func mergeValue(a, b json.RawMessage) json.RawMessage {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 {
		return b
	}
	switch {
	case a[0] == '[' && len(b) > 0 && b[0] == '[':
		var x, y []json.RawMessage
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return b
		}
		out, _ := json.Marshal(append(x, y...)) // raw elements already valid
		return out
	case a[0] == '{' && len(b) > 0 && b[0] == '{':
		var x, y map[string]json.RawMessage
		if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
			return b
		}
		out, _ := json.Marshal(mergeMembers(x, y))
		return out
	}
	return b
}
