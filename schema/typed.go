package schema

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// ErrUnsupportedType is wrapped by the error [For] returns for a Go type
// that has no JSON Schema.
var ErrUnsupportedType = errors.New("schema: unsupported Go type")

// For returns the JSON Schema of the Go type T: the shape that
// encoding/json gives a T, so that an output that passes [Schema.Validate]
// unmarshals into a T. (JSON Schema has two blind spots here: an integer
// beyond the range of a Go int64 or uint64 field, and an integer written
// with a fraction or exponent, such as 3.0, pass as integers but do not
// unmarshal into an integer field.) The schema is built by
// github.com/google/jsonschema-go and marshalled as compact JSON with a
// fixed key order (struct properties in field order), so it is
// byte-identical from call to call and can sit in a cached prompt prefix. It
// compiles with [Compile] and uses draft 2020-12.
//
// The Go types map to schemas as follows:
//
//   - structs become objects closed to other members ("additionalProperties":
//     false). Each exported field is a property named as its json tag says;
//     fields tagged json:"-" and unexported fields are left out, and the
//     fields of embedded structs are promoted. A field is required unless
//     its json tag has omitempty or omitzero. A `jsonschema:"..."` tag gives
//     the property's description; it must not be empty nor start with
//     "WORD=".
//   - string, bool, integer and floating-point types become "string",
//     "boolean", "integer" (with the type's bounds for sized and unsigned
//     integers) and "number".
//   - slices become arrays or null (a nil slice marshals as null); arrays
//     become arrays of exactly their length; []byte becomes a string or null
//     (base64, as encoding/json writes it).
//   - maps with string keys (or keys that implement encoding.TextMarshaler)
//     become objects whose members all match the value type's schema. Unlike
//     slices they do not allow null: a nil map field marshals as null unless
//     it is omitempty.
//   - pointers allow null besides the pointed-to type's schema.
//   - interface types (any) allow any value, and so does json.RawMessage.
//   - time.Time is a "date-time" string (RFC 3339, asserted by [Compile]'s
//     format checking), json.Number a number, big.Int an integer, big.Rat,
//     big.Float and slog.Level strings, and any other type that implements
//     encoding.TextMarshaler a string.
//
// For returns an error wrapping [ErrUnsupportedType] for types that have no
// JSON form or whose JSON form it cannot know: channels, functions, complex
// numbers, unsafe pointers, maps with other keys, recursive types, types
// with their own MarshalJSON method (other than those listed above), fields
// with the json ",string" option, and embedded fields that are not structs
// or have a json name. For is safe for concurrent use.
func For[T any]() (json.RawMessage, error) {
	return forType(reflect.TypeFor[T]())
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// knownTypes returns the schemas of the types whose JSON form For knows
// although they marshal themselves, or although jsonschema-go would describe
// them by their Go structure. A fresh map each time: jsonschema-go clones
// the schemas it uses, but the map is extended per call.
func knownTypes() map[reflect.Type]*jsonschema.Schema {
	anyJSON := []string{"null", "boolean", "number", "string", "array", "object"}
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
		reflect.TypeFor[json.RawMessage](): {Types: anyJSON},
		reflect.TypeFor[json.Number]():     {Type: "number"},
		reflect.TypeFor[big.Int]():         {Type: "integer"},
		reflect.TypeFor[big.Rat]():         {Type: "string"},
		reflect.TypeFor[big.Float]():       {Type: "string"},
		reflect.TypeFor[slog.Level]():      {Type: "string"},
	}
}

func forType(t reflect.Type) (json.RawMessage, error) {
	known := knownTypes()
	if err := collect(t, known, map[reflect.Type]bool{}); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrUnsupportedType, t, err)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: known})
	if err != nil {
		// Drop the library's "ForType(T): " prefix: the type is named here.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("%w %s: %w", ErrUnsupportedType, t, err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema: marshal the schema of %s: %w", t, err)
	}
	return unescapeHTML(raw), nil
}

// unescapeHTML undoes the escaping of <, > and & that encoding/json applies
// inside strings, so that descriptions read as written in the prompt. raw is
// valid JSON; it is modified in place.
func unescapeHTML(raw []byte) []byte {
	out := raw[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 == len(raw) {
			out = append(out, c)
			continue
		}
		// An escape: copy it whole, unless it is one of the three.
		if raw[i+1] == 'u' && i+6 <= len(raw) {
			switch string(raw[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out = append(out, c, raw[i+1])
		i++
	}
	return out
}

// collect walks the types reachable from t the way encoding/json does and
// adds to known the schema of each type that marshals itself as text. It
// fails on the types whose JSON form is unknown (see [For]). The other
// unsupported types are left for jsonschema-go to report.
func collect(t reflect.Type, known map[reflect.Type]*jsonschema.Schema, seen map[reflect.Type]bool) error {
	t = deref(t)
	if known[t] != nil || seen[t] {
		return nil
	}
	seen[t] = true
	pt := reflect.PointerTo(t)
	switch {
	case t.Implements(jsonMarshalerType) || pt.Implements(jsonMarshalerType):
		return fmt.Errorf("%s has its own MarshalJSON method, so its JSON form is unknown", t)
	case t.Implements(textMarshalerType) || pt.Implements(textMarshalerType):
		known[t] = &jsonschema.Schema{Type: "string"}
		return nil
	}
	switch t.Kind() {
	case reflect.Slice:
		if e := reflect.PointerTo(t.Elem()); t.Elem().Kind() == reflect.Uint8 &&
			!e.Implements(jsonMarshalerType) && !e.Implements(textMarshalerType) {
			// encoding/json writes byte slices as base64 strings.
			known[t] = &jsonschema.Schema{Types: []string{"null", "string"}}
			return nil
		}
		return collect(t.Elem(), known, seen)
	case reflect.Array:
		return collect(t.Elem(), known, seen)
	case reflect.Map:
		return collect(t.Elem(), known, seen)
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			switch {
			case tag == "-":
				continue
			case f.Anonymous && (name != "" || f.IsExported() && deref(f.Type).Kind() != reflect.Struct):
				return fmt.Errorf("field %s of %s: only embedded structs without a json name are supported", f.Name, t)
			case f.Anonymous || !f.IsExported():
				// The fields of an embedded struct come next, promoted.
				continue
			}
			for opt := range strings.SplitSeq(opts, ",") {
				if opt == "string" {
					return fmt.Errorf("field %s of %s: the json \",string\" option is not supported", f.Name, t)
				}
			}
			if err := collect(f.Type, known, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// deref returns the type that t points to, through any number of pointers.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
