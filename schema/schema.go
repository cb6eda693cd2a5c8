package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema. It is immutable after [Compile] and safe
// for concurrent use. The zero Schema is not usable; get one from [Compile].
type Schema struct {
	raw          json.RawMessage
	compiled     *jsonschema.Schema
	fast         *simpleSchema // nil unless the schema is simple
	instructions string
}

// schemaURL is the location the schema document is registered under. It is
// never fetched; references inside the document resolve against it.
const schemaURL = "batchagent:///output.schema.json"

// Compile compiles raw, a JSON Schema document. The draft is 2020-12 unless the
// document names another one in "$schema" (draft 4, 6, 7, 2019-09, 2020-12).
// Compile copies raw; the caller may reuse it afterwards.
//
// Compile reads nothing from files or the network: references inside the
// document ("#/$defs/x", "#anchor") work, and any other reference fails to
// compile. The returned error names what is wrong: the offset of a JSON syntax
// error (wrapping the [*encoding/json.SyntaxError]), each keyword of the
// document that breaks the meta-schema, with its path, or a reference cycle
// that would never let validation finish (a *[RefCycleError] naming the
// loop; see [ErrRefCycle]).
func Compile(raw json.RawMessage) (*Schema, error) {
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fmt.Errorf("schema: invalid JSON at offset %d: %w", se.Offset, err)
		}
		return nil, fmt.Errorf("schema: invalid JSON: %w", err)
	}
	doc, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("schema: invalid JSON: %w", err)
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(offlineLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, compileError(err, doc)
	}
	roots := []*jsonschema.Schema{compiled}
	for _, frag := range definitions(doc) {
		// A definition that does not compile on its own is not a schema
		// (draft 7 ignores "$defs"); one nothing refers to is never used.
		if def, err := c.Compile(schemaURL + frag); err == nil {
			roots = append(roots, def)
		}
	}
	if cycle := findCycle(roots...); cycle != nil {
		return nil, fmt.Errorf("schema: invalid schema: %w", cycle)
	}

	s := &Schema{raw: slices.Clone(raw), compiled: compiled, fast: compileSimple(doc)}
	s.instructions = instructions(compact(raw))
	return s, nil
}

// offlineLoader refuses to load anything, so that compiling a schema never
// touches files or the network. Meta-schemas are bundled with the validator
// and do not go through the loader.
type offlineLoader struct{}

func (offlineLoader) Load(url string) (any, error) {
	return nil, errors.New("only references within the schema document are supported")
}

// compileError turns a compile failure of the validator into an error that
// names the offending keywords by path within the schema document.
func compileError(err error, doc any) error {
	if sve, ok := errors.AsType[*jsonschema.SchemaValidationError](err); ok {
		if verr, ok := errors.AsType[*jsonschema.ValidationError](sve.Err); ok {
			problems := problemsOf(verr, doc)
			parts := make([]string, len(problems))
			for i, p := range problems {
				parts[i] = p.Path + ": " + p.Message
			}
			return fmt.Errorf("schema: invalid schema: %s", strings.Join(parts, "; "))
		}
	}
	// Other failures (a bad regular expression, an unresolvable reference)
	// name the location as a URL; show it relative to the document.
	msg := strings.ReplaceAll(err.Error(), schemaURL, "")
	return &compileFailure{msg: "schema: invalid schema: " + msg, err: err}
}

// compileFailure keeps the validator's error for errors.As while showing a
// message without the internal document URL.
type compileFailure struct {
	msg string
	err error
}

func (e *compileFailure) Error() string { return e.msg }
func (e *compileFailure) Unwrap() error { return e.err }

// Raw returns the schema document as given to [Compile]. The caller must not
// modify the returned slice.
func (s *Schema) Raw() json.RawMessage {
	return s.raw
}

// Validate checks one JSON document against the schema. It returns nil when
// the document is valid, and otherwise a [*ValidationError] listing every
// problem (each missing property, wrong type, enum mismatch... on its own),
// sorted by path and then message, with Raw set to doc. A document that is not
// valid JSON gives one problem at path "$" with the syntax error and its
// offset. Validate does not retain doc.
func (s *Schema) Validate(doc json.RawMessage) error {
	if _, v := s.fast.check(doc, false); v == valid {
		return nil
	}
	if !json.Valid(doc) {
		return &ValidationError{Problems: []Problem{syntaxProblem(doc)}, Raw: string(doc)}
	}
	v, err := decode(doc)
	if err != nil {
		return &ValidationError{Problems: []Problem{syntaxProblem(doc)}, Raw: string(doc)}
	}
	return s.validate(v, string(doc))
}

// decode decodes JSON the way the validator expects, with the validator's
// own decoder: numbers as json.Number, so that integers stay exact, and
// nothing but white space after the value.
func decode(doc []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(doc))
}

// validate validates a decoded value; raw is the text reported on failure.
// A panic of the validator (it dereferences nil on a number whose exponent
// math/big refuses, such as 1e1000001 against multipleOf) is a problem of
// the document, not a crash.
func (s *Schema) validate(v any, raw string) (result error) {
	defer func() {
		if p := recover(); p != nil {
			result = &ValidationError{Problems: []Problem{{Path: "$",
				Message: fmt.Sprintf("the document could not be validated (a number out of the range the validator handles?): %v", p)}}, Raw: raw}
		}
	}()
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	verr, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return &ValidationError{Problems: []Problem{{Path: "$", Message: err.Error()}}, Raw: raw}
	}
	return &ValidationError{Problems: problemsOf(verr, v), Raw: raw}
}

// syntaxProblem describes why doc is not valid JSON.
func syntaxProblem(doc []byte) Problem {
	var v any
	err := json.Unmarshal(doc, &v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return Problem{Path: "$", Message: fmt.Sprintf("invalid JSON at offset %d: %v", se.Offset, se)}
	}
	if err == nil {
		// json.Valid and json.Unmarshal disagree: not expected.
		return Problem{Path: "$", Message: "invalid JSON"}
	}
	return Problem{Path: "$", Message: "invalid JSON: " + err.Error()}
}

// noJSONMessage is the problem reported by [Schema.Parse] when the answer
// holds no JSON value.
const noJSONMessage = "no JSON object found in the answer"

// Parse extracts the JSON value from a model's free-text answer (see
// [Extract]), repairing it when it is broken (see [Repair]), and validates
// it. It is [Schema.ParseRepaired] without the list of repairs.
func (s *Schema) Parse(text string) (json.RawMessage, error) {
	out, _, err := s.ParseRepaired(text)
	return out, err
}

// ParseRepaired extracts the JSON value from a model's free-text answer and
// validates it. On success it returns the value as compact JSON (as
// [encoding/json.Compact] writes it), in a new slice owned by the caller, and
// the repairs made to it, as [Repair] lists them; repairs is nil when the
// answer held a valid JSON value (taking it out of a fence or prose is not a
// repair).
//
// The value is the one [Extract] finds, except when there is none, or when
// it is part of a larger JSON value that is broken (a truncated answer, in
// which Extract finds the first complete inner object): then the larger
// value is repaired if [Repair] can do so, and validated instead. A broken
// value that has no unambiguous repair is never guessed at, and a part of it
// is never taken for the answer.
//
// On failure it returns nil, nil and a [*ValidationError] whose Raw is text,
// listing every problem of the value as [Schema.Validate] reports them. When
// the answer's JSON is broken beyond repair, the one problem, at "$", is the
// syntax error of the broken value ("invalid JSON at offset 42: unexpected
// end of JSON input", the offset counting from its opening bracket). When
// the answer holds nothing that looks like JSON, it is "no JSON object found
// in the answer".
func (s *Schema) ParseRepaired(text string) (out json.RawMessage, repairs []string, err error) {
	start, b, found := extract(text)
	if found && len(b) == len(strings.TrimSpace(text)) {
		// The whole answer is valid JSON: the common, cheap case.
		return s.parsed(b, text)
	}
	var inside span // empty when nothing was found
	if found {
		inside = span{start, start + len(b)}
	}
	r, broken, ok := repair(text, inside)
	if ok {
		// r.out is compact already, and a new slice.
		if err := s.validateJSON(r.out, text); err != nil {
			return nil, nil, err
		}
		return r.out, r.repairs, nil
	}
	switch {
	case broken != "":
		// The answer is broken beyond repair. A value found is only a part
		// of it (the first complete inner object of a truncated answer):
		// taking it, even when it validates, would make up an answer.
		return nil, nil, &ValidationError{Problems: []Problem{syntaxProblem([]byte(broken))}, Raw: text}
	case found:
		return s.parsed(b, text)
	default:
		return nil, nil, &ValidationError{Problems: []Problem{{Path: "$", Message: noJSONMessage}}, Raw: text}
	}
}

// parsed validates b, valid JSON, and returns it as compact JSON in a new
// slice; text is the answer it comes from. A simple schema validates and
// compacts b in one pass; the library decides what that pass does not
// accept.
func (s *Schema) parsed(b []byte, text string) (json.RawMessage, []string, error) {
	if out, v := s.fast.check(b, true); v == valid {
		return out, nil, nil
	}
	if err := s.validateLibrary(b, text); err != nil {
		return nil, nil, err
	}
	return compact(b), nil, nil
}

// validateJSON validates b, valid JSON; text is the answer it comes from.
func (s *Schema) validateJSON(b []byte, text string) error {
	if _, v := s.fast.check(b, false); v == valid {
		return nil
	}
	return s.validateLibrary(b, text)
}

// validateLibrary decodes b, valid JSON, and validates it with the library,
// which reports every problem; text is the answer it comes from.
func (s *Schema) validateLibrary(b []byte, text string) error {
	v, err := decodeValue(b)
	if err != nil {
		return &ValidationError{Problems: []Problem{syntaxProblem(b)}, Raw: text}
	}
	return s.validate(v, text)
}

// Instructions returns the text that tells the model to answer with a single
// JSON value matching the schema, including the schema itself as compact
// JSON. It is computed once by [Compile] and is byte-identical for the same
// schema document, so it can sit in a cached prompt prefix.
func (s *Schema) Instructions() string {
	return s.instructions
}

func instructions(compactSchema []byte) string {
	var b strings.Builder
	b.WriteString("Answer with a single JSON value that conforms to this JSON Schema:\n")
	b.Write(compactSchema)
	b.WriteString("\nReply with the JSON value only: no explanations before or after it, and no Markdown code fences.")
	return b.String()
}

// compact returns b as compact JSON in a new slice; b must be valid JSON.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return slices.Clone(b)
	}
	return buf.Bytes()
}
