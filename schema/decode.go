package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// A valueDecoder decodes answers with one reused [jsontext.Decoder]: the
// encoding/json Decoder that jsonschema.UnmarshalJSON makes for each
// document allocated itself and its read buffer anew, a fifth of the
// memory a one-call agent allocates.
type valueDecoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

// As encoding/json decodes: the last of duplicate names wins, and text
// that is not UTF-8 becomes U+FFFD.
var v1Options = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

var valueDecoders = sync.Pool{New: func() any {
	vd := new(valueDecoder)
	vd.dec = jsontext.NewDecoder(&vd.r, v1Options...)
	return vd
}}

// decodeValue decodes b, one JSON value, into the values encoding/json
// decodes with UseNumber, which the validator takes: map[string]any, []any,
// string, json.Number, bool and nil.
func decodeValue(b []byte) (any, error) {
	vd := valueDecoders.Get().(*valueDecoder)
	defer valueDecoders.Put(vd)
	vd.r.Reset(b)
	vd.dec.Reset(&vd.r, v1Options...)
	defer vd.r.Reset(nil) // the pooled decoder keeps no answer
	v, err := vd.value()
	if err != nil {
		return nil, err
	}
	if _, err := vd.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// value reads the next JSON value.
func (vd *valueDecoder) value() (any, error) {
	tok, err := vd.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		m := make(map[string]any)
		for vd.dec.PeekKind() != '}' {
			tok, err := vd.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the next read voids tok
			v, err := vd.value()
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		if _, err := vd.dec.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := []any{}
		for vd.dec.PeekKind() != ']' {
			v, err := vd.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := vd.dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	}
	return nil, errors.New("unexpected JSON token " + tok.Kind().String())
}
