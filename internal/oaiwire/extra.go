package oaiwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/batchagent/batchagent/jsonenc"
	"github.com/batchagent/batchagent/llm"
)

// RequestFields are the members of a chat completions request that
// [Request] reads; every other member is an extra field.
var RequestFields = []string{
	"model", "messages", "tools", "tool_choice", "response_format", "max_tokens", "max_completion_tokens",
	"temperature", "top_p", "seed", "stop", "n", "stream", "stream_options",
}

// ReadExtra sets r.Extra to the members of body, r's JSON, that Request
// does not read, each as the client wrote it; nil when there are none.
// Request reads its members by their exact names: encoding/json matches
// names regardless of case, so a member such as "N" or "Model", which
// json.Unmarshal read into r, is taken back out of r (r is read again
// from the exactly named members) and kept as an extra field.
func (r *Request) ReadExtra(body []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return err
	}
	for _, k := range RequestFields {
		delete(all, k)
	}
	r.Extra = nil
	if len(all) == 0 {
		return nil
	}
	r.Extra = all
	for k := range all {
		if !slices.ContainsFunc(RequestFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			continue
		}
		// Rare: a name that folds onto one Request reads. Read r again
		// from the exact members only.
		var exact map[string]json.RawMessage
		if err := json.Unmarshal(body, &exact); err != nil {
			return err
		}
		maps.DeleteFunc(exact, func(name string, _ json.RawMessage) bool { return !slices.Contains(RequestFields, name) })
		b, err := json.Marshal(exact)
		if err != nil {
			return err
		}
		*r = Request{}
		if err := json.Unmarshal(b, r); err != nil {
			return err
		}
		r.Extra = all
		return nil
	}
	return nil
}

// writtenFields are the members AppendRequest writes itself: an extra
// field of one of these names is refused.
var writtenFields = []string{"model", "messages", "tools", "response_format", "max_tokens", "max_completion_tokens",
	"temperature", "top_p", "seed", "stop", "stream", "stream_options"}

// appendExtra appends req's extra fields, sorted by name, each value as
// it came (compacted).
func appendExtra(b []byte, extra map[string]json.RawMessage) ([]byte, error) {
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if slices.Contains(writtenFields, k) {
			return b, fmt.Errorf("extra field %q is one the request sets itself", k)
		}
		v := bytes.TrimSpace(extra[k])
		if !json.Valid(v) {
			return b, fmt.Errorf("extra field %q is not valid JSON", k)
		}
		b = append(b, ',')
		b = jsonenc.AppendString(b, k, false)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b, nil
}

// Members of an answer that the OpenAI backend reads; the rest is extra.
var (
	answerFields = []string{"id", "object", "created", "model", "choices", "usage"}
	choiceFields = []string{"index", "message", "delta", "finish_reason"}
)

// ReadAnswerExtra returns the members of data, a chat completion or a
// stream chunk, that no llm type holds: its own and its first choice's
// (index 0), null members left out, and its other choices (index 1 and
// up, of a request for n > 1) whole in Choices; nil when there are none. data must
// be valid JSON, as the caller's decode of it checked; one that is not
// an object has none.
func ReadAnswerExtra(data []byte) (*llm.Extra, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("oaiwire: empty answer")
	}
	var x llm.Extra
	eachMember(data, func(k, v []byte) bool {
		if string(k) == "choices" {
			eachElement(v, func(c []byte) bool {
				idx := choiceIndex(c)
				if idx != nil && string(idx) != "0" {
					x.Choices = append(x.Choices, bytes.Clone(c))
					return true
				}
				eachMember(c, func(k, v []byte) bool {
					x.Choice = addMember(x.Choice, k, v, choiceFields)
					return true
				})
				return true
			})
			return true
		}
		x.Top = addMember(x.Top, k, v, answerFields)
		return true
	})
	if x.Empty() {
		return nil, nil
	}
	return &x, nil
}

// addMember adds the member k (raw, between its quotes): v to m unless
// its name is known or its value null.
func addMember(m map[string]json.RawMessage, k, v []byte, known []string) map[string]json.RawMessage {
	name := string(k)
	if bytes.IndexByte(k, '\\') >= 0 {
		quoted := make([]byte, 0, len(k)+2)
		quoted = append(append(append(quoted, '"'), k...), '"')
		if json.Unmarshal(quoted, &name) != nil {
			return m
		}
	}
	if slices.Contains(known, name) || string(v) == "null" {
		return m
	}
	if m == nil {
		m = make(map[string]json.RawMessage, 2)
	}
	m[name] = bytes.Clone(v)
	return m
}

// HasAnswerExtra reports, without allocating, whether data, a valid
// chat completion or stream chunk, may hold members [ReadAnswerExtra]
// returns: a non-null member of its own or of a choice that no llm type
// holds, or a choice other than the first (index 1 and up). Streams
// check it on each chunk before the full decode, which most chunks do
// not need.
func HasAnswerExtra(data []byte) bool {
	found := false
	eachMember(data, func(k, v []byte) bool {
		if string(k) == "choices" {
			eachElement(v, func(c []byte) bool {
				eachMember(c, func(k, v []byte) bool {
					if string(k) == "index" {
						found = string(v) != "0"
					} else if !slices.Contains(choiceFields, string(k)) && string(v) != "null" {
						found = true
					}
					return !found
				})
				return !found
			})
		} else if !slices.Contains(answerFields, string(k)) && string(v) != "null" {
			found = true
		}
		return !found
	})
	return found
}

// SameAnswerExtra reports, without allocating, whether the members
// [ReadAnswerExtra] would return for data, a valid chat completion or
// stream chunk, are exactly those of x, by name and raw value. Servers
// repeat the same extras in every chunk of a stream (llama.cpp's and
// OpenAI's system_fingerprint): a stream checks each chunk against the
// previous chunk's Extra and sends that one again, unchanged, instead of
// decoding a new one. A name with an escape in it never matches, nor a
// chunk or an Extra holding a choice but the first (n > 1).
func SameAnswerExtra(data []byte, x *llm.Extra) bool {
	if x == nil || len(x.Choices) > 0 {
		return false // other choices are an answer's content, never repeated
	}
	same := true
	var top, choice int // the members of x seen
	match := func(k, v []byte, known []string, m map[string]json.RawMessage, n *int) bool {
		if slices.Contains(known, string(k)) || string(v) == "null" {
			return true
		}
		if bytes.IndexByte(k, '\\') >= 0 {
			same = false
			return false
		}
		if w, ok := m[string(k)]; !ok || !bytes.Equal(w, v) {
			same = false
			return false
		}
		*n++
		return true
	}
	eachMember(data, func(k, v []byte) bool {
		if string(k) == "choices" {
			eachElement(v, func(c []byte) bool {
				idx := choiceIndex(c)
				if idx != nil && string(idx) != "0" {
					same = false // a choice but the first: read it (n > 1)
					return false
				}
				eachMember(c, func(k, v []byte) bool { return match(k, v, choiceFields, x.Choice, &choice) })
				return false
			})
			return same
		}
		return match(k, v, answerFields, x.Top, &top)
	})
	return same && top == len(x.Top) && choice == len(x.Choice)
}

// eachMember calls fn with the raw key (between its quotes) and value of
// each member of the JSON object b, until fn returns false.
func eachMember(b []byte, fn func(k, v []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		end := skipValue(b, i)
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipSpace(b, i+1)
		end = skipValue(b, i)
		if !fn(key, b[i:end]) {
			return
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// eachElement calls fn with each element of the JSON array b, until fn
// returns false.
func eachElement(b []byte, fn func(v []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return
		}
		end := skipValue(b, i)
		if !fn(b[i:end]) {
			return
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that begins at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipValue(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	return j
}

// choiceIndex returns the raw "index" member of c, a choice object; nil
// when it has none.
func choiceIndex(c []byte) (idx []byte) {
	eachMember(c, func(k, v []byte) bool {
		if string(k) == "index" {
			idx = v
		}
		return idx == nil
	})
	return idx
}
