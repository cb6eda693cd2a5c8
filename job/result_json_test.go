package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// fillResult sets every field reachable from v to a non-zero value, so a
// field added to Result (or to a type it holds) shows up in
// TestResultAppendJSON. Err, Started and Spans are not written by the
// success path; a kind fillResult does not know fails the test.
func fillResult(t testing.TB, v reflect.Value, path string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[error](), reflect.TypeFor[time.Time](), reflect.TypeFor[[]Span]():
		return
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte("{ \"a\": [1, 2.5e3, \"<x> & \u2028\"], \"b\" : null }"))
		return
	case reflect.TypeFor[Input]():
		v.Set(reflect.ValueOf(Input{
			"z": "last <b>", "a": json.Number("12.5"), "m": map[string]any{"k": []any{true, nil, 1.5e-9}},
		}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path + ` "q" \ <&> ` + "\t\u2029")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path))*1_234_567 + 1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillResult(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		t.Fatalf("%s: kind %s unknown to fillResult; does AppendJSON write it?", path, v.Kind())
	}
}

// checkResultJSON holds r.AppendJSON equal to encoding/json's encoding.
func checkResultJSON(t *testing.T, r *Result) {
	t.Helper()
	want, werr := json.Marshal(r.jsonValue())
	got, gerr := r.AppendJSON([]byte("prefix"))
	switch {
	case werr != nil || gerr != nil:
		if werr == nil || gerr == nil || string(got) != "prefix" {
			t.Fatalf("AppendJSON = %s, %v; encoding/json %s, %v", got, gerr, want, werr)
		}
	case !bytes.Equal(got, append([]byte("prefix"), want...)):
		t.Fatalf("AppendJSON differs from encoding/json\n got: %s\nwant: prefix%s", got, want)
	}
	if m, err := r.MarshalJSON(); !bytes.Equal(m, want) || (err != nil) != (werr != nil) {
		t.Fatalf("MarshalJSON = %s, %v; want %s, %v", m, err, want, werr)
	}
}

func TestResultAppendJSON(t *testing.T) {
	var full Result
	fillResult(t, reflect.ValueOf(&full).Elem(), "Result")
	checkResultJSON(t, &full)
	checkResultJSON(t, &Result{})                                                // every omitempty left out
	checkResultJSON(t, &Result{Index: 3, Input: Input{}, Output: []byte(`"x"`)}) // an empty input is left out
	checkResultJSON(t, &Result{Timings: Timings{Backoff: 400 * time.Nanosecond, Total: 1500 * time.Microsecond}})
	failed := full
	failed.Err = &AgentError{Op: "validate", Turn: 2, Err: errors.New("bad <answer>")}
	failed.Raw = "not json <&>"
	checkResultJSON(t, &failed)
	// What encoding/json refuses, AppendJSON refuses.
	checkResultJSON(t, &Result{Output: []byte(`{"a":`)})
	checkResultJSON(t, &Result{Input: Input{"x": math.NaN()}})
}

// FuzzResultAppendJSON compares AppendJSON with encoding/json on results
// made of arbitrary text: an input's key and value, the output and a
// number literal.
func FuzzResultAppendJSON(f *testing.F) {
	f.Add("key", "value <&>", `{"x":[1,2]}`, "12", int64(1500))
	f.Add("\xfe", "\u2028\x00", ` [ ] `, "1.e5", int64(-1))
	f.Add("", "", "", "", int64(0))
	f.Fuzz(func(t *testing.T, key, value, output, number string, ns int64) {
		r := &Result{
			Index:   int(ns),
			Input:   Input{key: value, key + "n": json.Number(number), key + "l": []any{value, 1.0 / float64(ns|1)}},
			Output:  json.RawMessage(output),
			Usage:   llm.Usage{PromptTokens: ns, CompletionTokens: ns / 3, CachedTokens: ns % 5},
			Timings: Timings{Queue: time.Duration(ns), TTFT: time.Duration(ns) * 3, Backoff: time.Duration(ns / 7)},
		}
		checkResultJSON(t, r)
	})
}
