// Package pack is the wire protocol of packed prompts: several agents'
// tasks in one model call, answered by one JSON object keyed by the
// agents' ids. The engine builds packed requests with it and reads their
// streamed answers with [Scanner]; the simulator recognises and answers
// them with it.
//
// A packed request has a system message (the job's system prompt, then
// [Instructions]), one user message ([Tasks]: the tasks as a JSON object
// keyed by id, in order) and an output schema named [SchemaName]
// ([Schema]: an object whose properties are the ids, in order, each the
// job's output schema, all required).
package pack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SchemaName is the name of a packed request's output schema
// (llm.OutputSpec.Name, response_format.json_schema.name on the wire): it
// marks the request as packed.
const SchemaName = "batchagent_pack"

// ID returns the id of the i-th (0-based) agent of a pack: "a1", "a2", ...
// The ids of a pack of n agents are ID(0) to ID(n-1), given to its agents
// in the order of their input indexes, so that equal packs give equal
// prompts.
func ID(i int) string { return "a" + strconv.Itoa(i+1) }

// textSchema is the schema of an entry of a job without an output schema:
// its answer is text.
var textSchema = json.RawMessage(`{"type":"string"}`)

// Schema returns the output schema of a pack of n agents whose answers
// follow entry (nil or empty: text, a JSON string): an object whose
// properties are ID(0) to ID(n-1) in that order, each entry, all
// required, and no others. The entry's "$defs" and "definitions" move to
// the pack's root, so that its references ("#/$defs/...") resolve there
// as they did in entry; see [Packable].
func Schema(entry json.RawMessage, n int) json.RawMessage {
	if len(bytes.TrimSpace(entry)) == 0 {
		entry = textSchema
	}
	var hoisted map[string]json.RawMessage // the entry's $defs and definitions
	if obj := map[string]json.RawMessage{}; json.Unmarshal(entry, &obj) == nil {
		for _, k := range []string{"$defs", "definitions", "$schema"} {
			if v, ok := obj[k]; ok {
				if hoisted == nil {
					hoisted = map[string]json.RawMessage{}
				}
				if k != "$schema" { // a dialect is the caller's to declare
					hoisted[k] = v
				}
				delete(obj, k)
			}
		}
		if hoisted != nil {
			entry, _ = json.Marshal(obj) // decoded from JSON: Marshal cannot fail
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"object",`)
	for _, k := range []string{"$defs", "definitions"} {
		if v, ok := hoisted[k]; ok {
			fmt.Fprintf(&b, "%q:", k)
			b.Write(v)
			b.WriteByte(',')
		}
	}
	b.WriteString(`"properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", ID(i))
		b.Write(entry)
	}
	b.WriteString(`},"required":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", ID(i))
	}
	b.WriteString(`],"additionalProperties":false}`)
	return b.Bytes()
}

// Instructions returns what a packed call's system message says after the
// job's system prompt: how to answer several tasks at once. entry is what
// each answer must be: the output schema's instructions, or "" for text.
// It is the same for every pack of a job, so that it stays in the shared
// prefix.
func Instructions(entry string) string {
	var b strings.Builder
	b.WriteString("You will be given several independent tasks at once, as a JSON object that maps each task's id to its text. ")
	b.WriteString("Do each task on its own, as if it were the only one. ")
	b.WriteString("Reply with a single JSON object that maps every task id, in the order given, to that task's answer, ")
	b.WriteString("with each id exactly once and no other keys, and nothing before or after the object.")
	if entry == "" {
		b.WriteString(" Each answer is a JSON string holding the answer's text.")
	} else {
		b.WriteString("\n\nEach answer must follow these instructions:\n\n")
		b.WriteString(entry)
	}
	return b.String()
}

// tasksHeader begins the user message of a packed call.
const tasksHeader = "Tasks:\n"

// Tasks returns the user message of a packed call: the tasks as a JSON
// object keyed by ID(0) to ID(len(tasks)-1), one per line, in order.
func Tasks(tasks []string) string {
	var b strings.Builder
	b.WriteString(tasksHeader)
	b.WriteString("{")
	for i, t := range tasks {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		id, _ := json.Marshal(ID(i))
		text, _ := json.Marshal(t) // a string: Marshal cannot fail
		b.Write(id)
		b.WriteString(": ")
		b.Write(text)
	}
	b.WriteString("\n}")
	return b.String()
}

// ErrNotPacked is the error of ParseTasks for a message that Tasks did
// not write.
var ErrNotPacked = errors.New("pack: not a packed tasks message")

// ParseTasks returns the ids and texts of the tasks of msg, a message
// that Tasks wrote, in order. It returns ErrNotPacked (wrapped) when msg
// is not one.
func ParseTasks(msg string) (ids, tasks []string, err error) {
	body, ok := strings.CutPrefix(msg, tasksHeader)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no %q header", ErrNotPacked, strings.TrimSpace(tasksHeader))
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("%w: the tasks are not a JSON object", ErrNotPacked)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrNotPacked, err)
		}
		var text string
		if err := dec.Decode(&text); err != nil {
			return nil, nil, fmt.Errorf("%w: task %v: %v", ErrNotPacked, k, err)
		}
		ids = append(ids, k.(string))
		tasks = append(tasks, text)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNotPacked, err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("%w: text after the tasks", ErrNotPacked)
	}
	return ids, tasks, nil
}
