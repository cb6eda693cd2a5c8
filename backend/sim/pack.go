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
// corrupted at Config.CorruptRate.
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
	var scratch []byte
	entry := func(buf []byte, i int, invalid bool) []byte {
		seed := hashString(ids[i])
		if t, ok := tasks[ids[i]]; ok {
			seed = hashString(t)
		}
		r := gen.NewRNG(m.cfg.Seed, seed^turn)
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

	cr := gen.NewRNG(m.cfg.Seed^corruptSalt, hashString(tasksMsg)^turn)
	buf := make([]byte, 0, 64*len(ids)+2)
	buf = append(buf, '{')
	corrupted := 0
	for i := 0; i < len(ids); i++ {
		id := ids[i]
		kind := corruptNone
		if m.cfg.CorruptRate > 0 && cr.Float64() < m.cfg.CorruptRate {
			kind = corruption(1 + min(int(cr.Float64()*corruptions), corruptions-1))
			corrupted++
		}
		switch kind {
		case corruptNone:
			buf = entry(member(buf, id), i, false)
		case corruptInvalid:
			buf = entry(member(buf, id), i, true)
		case corruptMissing:
		case corruptDuplicate:
			buf = entry(member(buf, id), i, false)
			if i+1 < len(ids) {
				i++ // the next entry's value, under this id
			}
			buf = entry(member(buf, id), i, false)
		case corruptUnknown:
			unknown := "zz" + id
			for inPack[unknown] {
				unknown = "z" + unknown
			}
			buf = entry(member(buf, unknown), i, false)
		}
	}
	buf = append(buf, '}')
	m.packed.Add(1)
	m.corrupted.Add(int64(corrupted))
	return string(buf), nil
}
