package input_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// TestTypedCSV: declared columns take their type where a cell is
// unambiguously one; every other cell, and every undeclared column, stays
// the string it was.
func TestTypedCSV(t *testing.T) {
	src := "id,price,ok,code,note\n" +
		"007,2.5,true,007,x\n" +
		"-3,+01.50,FALSE,8,y\n" +
		"7.0,1e3,1,9,z\n" +
		",NaN,yes,,\n" +
		"99999999999999999999,0x1F,false ,1,\n"
	types := map[string]string{"id": "integer", "price": "number", "ok": "boolean", "other": "integer"}
	var got []job.Input
	for in, err := range input.TypedCSV(strings.NewReader(src), "in.csv", types) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, in)
	}
	want := []job.Input{
		{"id": json.Number("7"), "price": json.Number("2.5"), "ok": true, "code": "007", "note": "x"},
		{"id": json.Number("-3"), "price": json.Number("1.5"), "ok": false, "code": "8", "note": "y"},
		{"id": "7.0", "price": json.Number("1e3"), "ok": "1", "code": "9", "note": "z"},
		{"id": "", "price": "NaN", "ok": "yes", "code": "", "note": ""},
		{"id": "99999999999999999999", "price": "0x1F", "ok": "false ", "code": "1", "note": ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TypedCSV (-want +got):\n%s", diff)
	}
	var plain []job.Input
	for in, err := range input.TypedCSV(strings.NewReader(src), "in.csv", nil) {
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, in)
	}
	if plain[0]["id"] != "007" || plain[0]["ok"] != "true" {
		t.Errorf("TypedCSV without types typed a value: %v", plain[0])
	}
}
