package schema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeCorpus holds valid JSON documents, the input decodeValue is given,
// with the cases where decoders differ: duplicate names, bytes that are
// not UTF-8, lone surrogates, escapes, numbers beyond float64.
var decodeCorpus = []string{
	`{"name":"Ada","age":36,"tags":["a","b"],"ok":true,"none":null}`,
	`{"a":1,"a":2}`,
	`{"a":{"b":[1,{"c":"d"}]},"a":[]}`,
	"\"\xff\xfe\"",
	`"\ud800"`,
	`"\ud83d\ude00 \u00e9 \n \" \\ \/"`,
	`123456789012345678901234567890`,
	`-1.5e-300`,
	`1e1000001`,
	`[]`,
	`{}`,
	` [ 1 , 2 ] `,
	`false`,
	`null`,
	"{\"k\xc3\":\"v\"}",
}

// TestDecodeValueMatchesEncodingJSON shows that decodeValue decodes every
// document as jsonschema.UnmarshalJSON (encoding/json with UseNumber) does.
func TestDecodeValueMatchesEncodingJSON(t *testing.T) {
	for _, doc := range decodeCorpus {
		checkDecode(t, []byte(doc))
	}
}

func checkDecode(t *testing.T, doc []byte) {
	t.Helper()
	want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	got, gerr := decodeValue(doc)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("decodeValue(%q): error %v, encoding/json's %v", doc, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeValue(%q) = %#v, encoding/json decodes %#v", doc, got, want)
	}
}

// FuzzDecodeValue checks decodeValue against encoding/json on every valid
// JSON document, the only input it is given.
func FuzzDecodeValue(f *testing.F) {
	for _, doc := range decodeCorpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		checkDecode(t, doc)
	})
}
