package oaiwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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
func (r *Request) ReadExtra(body []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return err
	}
	for _, k := range RequestFields {
		delete(all, k)
	}
	r.Extra = nil
	if len(all) > 0 {
		r.Extra = all
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
// (index 0), null members left out; nil when there are none.
func ReadAnswerExtra(data []byte) (*llm.Extra, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	var x llm.Extra
	if raw, ok := top["choices"]; ok {
		var choices []map[string]json.RawMessage
		if json.Unmarshal(raw, &choices) == nil {
			for _, c := range choices {
				if idx := string(bytes.TrimSpace(c["index"])); idx != "" && idx != "0" {
					continue
				}
				x.Choice = extraMembers(c, choiceFields)
				break
			}
		}
	}
	x.Top = extraMembers(top, answerFields)
	if x.Empty() {
		return nil, nil
	}
	return &x, nil
}

func extraMembers(m map[string]json.RawMessage, known []string) map[string]json.RawMessage {
	for _, k := range known {
		delete(m, k)
	}
	for k, v := range m {
		if string(bytes.TrimSpace(v)) == "null" {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
