package sim

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/backend/sim/internal/gen"
	"github.com/batchagent/batchagent/internal/pack"
	"github.com/batchagent/batchagent/llm"
)

// corruption is a way an entry of a packed answer goes wrong.
type corruption uint8

// The corruptions, drawn uniformly for each corrupted entry.
const (
	// corruptNone leaves the entry as it is.
	corruptNone corruption = iota
	// corruptInvalid gives the entry a value that violates its schema.
	corruptInvalid
	// corruptMissing leaves the entry's member out.
	corruptMissing
	// corruptDuplicate writes the entry's id again in place of the next
	// entry's (whose value it takes, so the next id goes missing), or,
	// for the last entry, writes its member twice.
	corruptDuplicate
	// corruptUnknown writes the entry under an id not in the pack ("zz"
	// and its id).
	corruptUnknown
)

// corruptions is the number of kinds of corruption, corruptNone excluded.
const corruptions = 4

// corruptSalt sets the corruption draws apart from the answers' draws.
const corruptSalt = 0x9e3779b97f4a7c15

// biasSalt sets the position-bias draws apart from the corruption draws,
// so that a PositionBias leaves the corruptions where they were.
const biasSalt = 0xc2b2ae3d27d4eb4f

// wrongTries bounds the draws of a wrong entry: a schema with few values
// (an enum of two) may give the right one again; one with a single value
// (a const) can never be wrong, and its entry stays right.
const wrongTries = 8

// PackSize returns the number of tasks in req when it is a packed request
// (its output schema is named pack.SchemaName): the ids its schema
// requires. It returns 0 for any other request.
func PackSize(req *llm.Request) int {
	if req.Output == nil || req.Output.Name != pack.SchemaName {
		return 0
	}
	var ps struct {
		Required []string `json:"required"`
	}
	if json.Unmarshal(req.Output.Schema, &ps) != nil {
		return 0
	}
	return len(ps.Required)
}

// packSchema is what a packed answer reads from its output schema.
type packSchema struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	// Defs and Definitions are the entries' definitions, which
	// pack.Schema moves to the root: each entry is compiled with them.
	Defs        json.RawMessage `json:"$defs"`
	Definitions json.RawMessage `json:"definitions"`
}

// withDefs returns entry with the pack's definitions put back, so that
// its references resolve when it is compiled on its own.
func (ps *packSchema) withDefs(entry json.RawMessage) json.RawMessage {
	if ps.Defs == nil && ps.Definitions == nil {
		return entry
	}
	obj := map[string]json.RawMessage{}
	if json.Unmarshal(entry, &obj) != nil {
		return entry // not an object: it refers to nothing
	}
	if ps.Defs != nil {
		obj["$defs"] = ps.Defs
	}
	if ps.Definitions != nil {
		obj["definitions"] = ps.Definitions
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return entry
	}
	return out
}

// textEntrySchema is the schema of an entry of a pack of text answers.
var textEntrySchema = json.RawMessage(`{"type":"string"}`)

// packAnswer answers a packed request (its output schema is named
// pack.SchemaName): one JSON object with a member per id of the schema's
// "required", in order, each generated from the id's property schema and
// seeded by the id's task (from tasksMsg, the first user message), so
// that it equals the answer the task gets alone. Entries are then
// corrupted at Config.CorruptRate, and the others made wrong (valid, but
// not the task's answer alone) at Config.PositionBias·i/(k-1) by their
// position i in the pack of k.
func (m *Model) packAnswer(req *llm.Request, tasksMsg string) (string, error) {
	var ps packSchema
	if err := json.Unmarshal(req.Output.Schema, &ps); err != nil {
		return "", fmt.Errorf("sim: pack output schema: %w", err)
	}
	ids := ps.Required
	// A pack of text answers: the entries are the JSON strings of the
	// text the tasks get alone.
	text := false
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleSystem && strings.HasSuffix(msg.Content, pack.Instructions("")) {
			text = true
		}
	}
	gens := make([]*gen.Generator, len(ids))
	for i, id := range ids {
		schema, ok := ps.Properties[id]
		switch {
		case text:
			schema = textEntrySchema // for the "invalid" corruption
		case !ok || len(schema) == 0:
			schema = json.RawMessage(`{}`)
		default:
			schema = ps.withDefs(schema)
		}
		g, err := m.generator(schema)
		if err != nil {
			return "", fmt.Errorf("sim: pack output schema: entry %s: %w", id, err)
		}
		gens[i] = g
	}
	tasks := make(map[string]string, len(ids))
	if tids, texts, err := pack.ParseTasks(tasksMsg); err == nil {
		for i, id := range tids {
			tasks[id] = texts[i]
		}
	}
	inPack := make(map[string]bool, len(ids))
	for _, id := range ids {
		inPack[id] = true
	}
	turn := uint64(len(req.Messages))

	// entry appends the i-th entry's value, seeded as its task would be
	// alone: by its text and the conversation's length.
	// A non-zero salt draws another value: a wrong answer.
	var scratch []byte
	entry := func(buf []byte, i int, invalid bool, salt uint64) []byte {
		seed := hashString(ids[i])
		if t, ok := tasks[ids[i]]; ok {
			seed = hashString(t)
		}
		r := gen.NewRNG(m.cfg.Seed, seed^turn^salt)
		if text && !invalid {
			scratch = m.appendAnswer(scratch[:0], nil, &r, false)
			return gen.AppendJSONString(buf, string(scratch))
		}
		return m.appendAnswer(buf, gens[i], &r, invalid)
	}
	member := func(buf []byte, id string) []byte {
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		return append(gen.AppendJSONString(buf, id), ':')
	}

	// wrong appends a value of the i-th entry other than right (its
	// answer alone), or right itself when wrongTries draws found none.
	var other []byte
	wrong := func(buf []byte, i int, right []byte) ([]byte, bool) {
		for try := range uint64(wrongTries) {
			other = entry(other[:0], i, false, biasSalt+try)
			if string(other) != string(right) {
				return append(buf, other...), true
			}
		}
		return append(buf, right...), false
	}

	cr := gen.NewRNG(m.cfg.Seed^corruptSalt, hashString(tasksMsg)^turn)
	br := gen.NewRNG(m.cfg.Seed^biasSalt, hashString(tasksMsg)^turn)
	k := len(ids)
	buf := make([]byte, 0, 64*k+2)
	buf = append(buf, '{')
	corrupted, biased := 0, 0
	for i := 0; i < k; i++ {
		id := ids[i]
		kind := corruptNone
		if m.cfg.CorruptRate > 0 && cr.Float64() < m.cfg.CorruptRate {
			kind = corruption(1 + min(int(cr.Float64()*corruptions), corruptions-1))
			corrupted++
		}
		switch kind {
		case corruptNone:
			buf = member(buf, id)
			if m.cfg.PositionBias > 0 && k > 1 && br.Float64() < m.cfg.PositionBias*float64(i)/float64(k-1) {
				at := len(buf)
				buf = entry(buf, i, false, 0)
				right := string(buf[at:])
				var ok bool
				if buf, ok = wrong(buf[:at], i, []byte(right)); ok {
					biased++
				}
				continue
			}
			buf = entry(buf, i, false, 0)
		case corruptInvalid:
			buf = entry(member(buf, id), i, true, 0)
		case corruptMissing:
		case corruptDuplicate:
			buf = entry(member(buf, id), i, false, 0)
			if i+1 < k {
				i++ // the next entry's value, under this id
			}
			buf = entry(member(buf, id), i, false, 0)
		case corruptUnknown:
			unknown := "zz" + id
			for inPack[unknown] {
				unknown = "z" + unknown
			}
			buf = entry(member(buf, unknown), i, false, 0)
		}
	}
	buf = append(buf, '}')
	m.packed.Add(1)
	m.corrupted.Add(int64(corrupted))
	m.biased.Add(int64(biased))
	return string(buf), nil
}
