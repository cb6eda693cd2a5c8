package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/schema"
)

// stdEncode is what appendState must write: encoding/json's encoder
// without HTML escaping, of st with the one rule by which the two differ
// by design applied first: a message part that an entry of st.Media names
// (same kind, ref and hash) is saved without its bytes.
func stdEncode(st *agent.State) ([]byte, error) {
	saved := *st
	if len(st.Media) > 0 && st.Messages != nil {
		saved.Messages = make([]llm.Message, len(st.Messages))
		for i, m := range st.Messages {
			m.Parts = slices.Clone(m.Parts)
			for j := range m.Parts {
				p := &m.Parts[j]
				for _, r := range st.Media {
					if p.Kind != llm.PartText && p.Ref != "" && p.Hash != "" && r.Kind == p.Kind && r.Ref == p.Ref && r.Hash == p.Hash {
						p.Data = nil
					}
				}
			}
			saved.Messages[i] = m
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(&saved)
	return buf.Bytes(), err
}

// checkSame fails unless appendState and encoding/json agree on st: the
// same bytes, or both an error.
func checkSame(t *testing.T, st *agent.State) {
	t.Helper()
	want, wantErr := stdEncode(st)
	got, err := appendState(nil, st)
	switch {
	case wantErr != nil && err != nil:
		return
	case wantErr != nil:
		t.Fatalf("encoding/json fails (%v), appendState wrote %s", wantErr, got)
	case err != nil:
		t.Fatalf("appendState: %v; encoding/json wrote %s", err, want)
	case !bytes.Equal(got, want):
		t.Fatalf("appendState differs from encoding/json\n got: %s\nwant: %s", got, want)
	}
}

// fill sets every field reachable from v to a non-zero value, so that a
// field added to agent.State (or to a type it holds) shows up in the
// comparison. A kind it does not know fails the test: teach appendState the
// new field, then this function.
func fill(t testing.TB, v reflect.Value, path string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte("{ \"a\": [1, 2.5e3, \"<x> & \u2028\"], \"b\" : null }"))
		return
	case reflect.TypeFor[job.Input]():
		v.Set(reflect.ValueOf(job.Input{
			"z": "last", "a": json.Number("12.5"), "m": map[string]any{"k": []any{true, nil, 1.5}},
		}))
		return
	case reflect.TypeFor[[]byte]():
		v.SetBytes([]byte{0, 1, 0xfe, 0xff, '<', '&'}) // a media part's bytes: base64 in JSON
		return
	case reflect.TypeFor[time.Time]():
		// Not UTC, with nanoseconds and a monotonic reading, which JSON drops.
		now := time.Now()
		v.Set(reflect.ValueOf(now.In(time.FixedZone("", -(3*3600 + 30*60))).Add(time.Duration(len(path)))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path + ` "q" \ <&> ` + "\t\u2029")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path)) + 1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), path+"[]")
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: kind %s unknown to fill; does appendState write it?", path, v.Kind())
	}
}

func TestAppendStateMatchesEncodingJSON(t *testing.T) {
	var full agent.State
	fill(t, reflect.ValueOf(&full).Elem(), "State")
	checkSame(t, &full)

	// Tool arguments malformed, missing, needing HTML escapes or none.
	calls := full
	calls.Messages = []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
		{ID: "1", Name: "f", Arguments: json.RawMessage(`{"path": "a<b>", `)},
		{ID: "2", Name: "g"},
		{ID: "3", Name: "h", Arguments: json.RawMessage("\xff")},
		{ID: "4", Name: "i", Arguments: json.RawMessage("{\"s\": \"\u2028\u2029 \u00e9 \\u003c\"}")},
		{ID: "5", Name: "j", Arguments: json.RawMessage(` {"plain": [1, 2.5, null]} `)},
	}}}
	checkSame(t, &calls)

	for name, st := range map[string]agent.State{
		"zero":        {},
		"empty lists": {Messages: []llm.Message{}, Failure: &job.Failure{Cause: []job.Link{}, Problems: []schema.Problem{}}, Input: job.Input{}},
		"running": {JobID: "j", Index: 7, Status: agent.StatusRunning, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "bad utf-8 \xff\xfe, NUL \x00, DEL \x7f, \b\f\r\n, é, 😀"},
		}, Timings: agent.Timings{Queue: time.Second, TTFT: -time.Millisecond}},
		"input types": {Input: job.Input{
			"nil": nil, "f": 0.000001, "tiny": 1e-7, "big": 1e21, "neg": -1.5e-300, "zero": 0.0,
			"int": 3, "int64": int64(-9), "num": json.Number("-0.5E+10"), "empty num": json.Number(""),
			"list": []any{}, "nil list": []any(nil), "nil map": map[string]any(nil),
			"time": time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), "strs": []string{"<a>"},
			"\u2028key\x01": "v",
		}},
		"output with spaces": {Status: agent.StatusDone, Output: json.RawMessage(" [ 1 ,\n\t{\"a\" : \"b c\"} ] ")},
		"spans": {Started: time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.UTC), Spans: []job.Span{
			{}, // zero time, zero durations
			{Turn: 1, Start: time.Unix(0, 1).UTC(), Queue: 1}, // omitempty members left out
			{Turn: 2, Start: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", 14*3600)),
				Queue: -1, Inference: math.MaxInt64, TTFT: math.MinInt64, Backoff: 3, Tools: 4, Tier: 9},
			{Turn: 3, Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("odd", 5*3600+30*60+17))},
			{Turn: 4, Start: time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", -12*3600))},
			{Turn: 5, Start: time.Now().In(time.Local), Inference: time.Second},
		}},
		"started zero but zoned":  {Started: time.Time{}.In(time.FixedZone("z", 3600))},
		"started with nanos only": {Started: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		"empty spans":             {Spans: []job.Span{}},
		"task media": {Media: []llm.Part{{Kind: llm.PartImage, Ref: "photos/a.png", Hash: "ab12"}, {Kind: llm.PartFile, Ref: "a.pdf", Hash: "cd"}},
			Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
				{Kind: llm.PartText, Text: "describe", Ref: "photos/a.png", Hash: "ab12"},
				{Kind: llm.PartImage, Data: []byte("\x89PNG<&>"), MediaType: "image/png", Ref: "photos/a.png", Hash: "ab12", Width: 2},
				{Kind: llm.PartImage, Data: []byte("other"), Ref: "photos/a.png", Hash: "changed"}, // not the task's: kept
				{Kind: llm.PartFile, Data: []byte("%PDF-"), Ref: "a.pdf", Hash: "cd", Pages: 1},
				{Kind: llm.PartImage, URL: "https://x.test/a.png", Ref: "https://x.test/a.png"},
			}}, {Role: llm.RoleTool, ToolCallID: "1", Parts: []llm.Part{
				{Kind: llm.PartImage, Data: []byte("tool"), Ref: "docs/b.png", Hash: "ef"}, // a tool's result: kept
			}}}},
		"task media, no messages": {Media: []llm.Part{{Kind: llm.PartImage, Ref: "a.png", Hash: "ab"}}},
	} {
		t.Run(name, func(t *testing.T) { checkSame(t, &st) })
	}
}

// TestAppendStateDropsTaskMediaBytes holds that a state saves its task
// media as references: the bytes of the image st.Media names are absent
// from the line, in raw and base64 form, its ref and hash present, and a
// tool result's image kept.
func TestAppendStateDropsTaskMediaBytes(t *testing.T) {
	img := []byte("\x89PNG\r\n\x1a\nsecret-pixels-0123456789")
	tool := []byte("tool-result-bytes")
	st := agent.State{Index: 1, Status: agent.StatusRunning,
		Media: []llm.Part{{Kind: llm.PartImage, Ref: "photos/a.png", Hash: "feed"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "t"}, {Kind: llm.PartImage, Data: img, MediaType: "image/png", Ref: "photos/a.png", Hash: "feed"}}},
			{Role: llm.RoleTool, ToolCallID: "c", Parts: []llm.Part{{Kind: llm.PartImage, Data: tool, Ref: "x.png", Hash: "99"}}},
		}}
	line, err := appendState(nil, &st)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{string(img), base64.StdEncoding.EncodeToString(img), "secret-pixels"} {
		if bytes.Contains(line, []byte(absent)) {
			t.Errorf("the state holds the image's bytes (%q): %s", absent, line)
		}
	}
	for _, present := range []string{`"ref":"photos/a.png","hash":"feed"`, `"media":[{"kind":"image","ref":"photos/a.png","hash":"feed"}]`, base64.StdEncoding.EncodeToString(tool)} {
		if !bytes.Contains(line, []byte(present)) {
			t.Errorf("the state lacks %s: %s", present, line)
		}
	}
	if st.Messages[0].Parts[1].Data == nil {
		t.Error("encoding dropped the bytes of the agent's own message")
	}
	var back agent.State
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	if p := back.Messages[0].Parts[1]; p.Data != nil || p.Ref != "photos/a.png" || p.Hash != "feed" {
		t.Errorf("decoded part = %+v", p)
	}
	if !reflect.DeepEqual(back.Media, st.Media) {
		t.Errorf("decoded media = %+v, want %+v", back.Media, st.Media)
	}
}

func TestAppendStateErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		st   agent.State
		want string
	}{
		"invalid output": {agent.State{Output: json.RawMessage(`{"a":`)}, "output: "},
		"NaN input":      {agent.State{Input: job.Input{"x": []any{math.NaN()}}}, "input: unsupported value: NaN"},
		"bad number":     {agent.State{Input: job.Input{"x": json.Number("1.")}}, `input: invalid number literal "1."`},
		"bad type":       {agent.State{Input: job.Input{"x": make(chan int)}}, "input: json: unsupported type"},
		"started past 9999": {agent.State{Started: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			"started: Time.AppendText: year outside of range"},
		"span start before 0": {agent.State{Spans: []job.Span{{}, {Start: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}},
			"spans[1]: start: Time.AppendText: year outside of range"},
		"zone of 24 hours": {agent.State{Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
			"started: Time.AppendText: timezone hour outside of range"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := stdEncode(&tc.st); err == nil {
				t.Fatal("encoding/json accepts it too; the case tests nothing")
			}
			_, err := appendState(nil, &tc.st)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

// FuzzAppendState compares appendState with encoding/json on states made
// of arbitrary text: message contents, tool arguments, the output, the
// input's keys and number literals.
func FuzzAppendState(f *testing.F) {
	f.Add("hello", `{"a": 1}`, `{"x":[1,2]}`, "key", "12")
	f.Add("<&>\u2028\x00\xff", `{"a": `, ` [ ] `, "\xfe", "1.e5")
	f.Add("", "", "", "", "")
	f.Add("\"\\", `"\u2028<"`, `{"a":"\ud800"}`, "é", "-0.0e-0")
	f.Fuzz(func(t *testing.T, content, args, output, key, number string) {
		st := agent.State{
			JobID:  content,
			Input:  job.Input{key: content, "n": json.Number(number), key + "2": []any{content, 1.5}},
			Status: agent.StatusDone,
			Messages: []llm.Message{
				{Role: llm.RoleUser, Content: content},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: key, Name: content, Arguments: json.RawMessage(args)}}},
				{Role: llm.RoleTool, Content: content, ToolCallID: key, Name: key, IsError: true},
			},
			Failure: &job.Failure{Kind: job.Kind(key), Op: content, Turn: -1, Cause: []job.Link{{Message: content, Class: key}, {Message: key}},
				Problems: []schema.Problem{{Path: key, Message: content}}},
			Output: json.RawMessage(output),
			Raw:    output,
		}
		checkSame(t, &st)
	})
}

// FuzzAppendStateTimes compares appendState with encoding/json on states
// holding arbitrary times: instants, zones and span durations.
func FuzzAppendStateTimes(f *testing.F) {
	f.Add(int64(0), int64(0), 0, int64(0))
	f.Add(int64(1798700000), int64(123456789), -5*3600-30*60, int64(1500))
	f.Add(int64(253402300799), int64(999999999), 14*3600, int64(-1))
	f.Add(int64(-62135596800), int64(1), 86399, int64(math.MaxInt64))
	f.Add(int64(-62135596801), int64(0), 0, int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int, d int64) {
		at := time.Unix(sec, nsec).In(time.FixedZone("f", offset))
		st := agent.State{Started: at, Spans: []job.Span{
			{Turn: int(d), Start: at, Queue: time.Duration(d), Inference: time.Duration(-d), TTFT: time.Duration(d), Tools: time.Duration(d)},
			{Start: at.UTC(), Backoff: time.Duration(d), Tier: int(nsec)},
		}}
		checkSame(t, &st)
	})
}
