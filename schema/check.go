package schema

import (
	"encoding/json"
	"errors"
)

// CheckFunc is a semantic check of an output, for rules a JSON Schema cannot
// express (an end date after the start date, a total that matches its
// items, an ID that exists). The agent runs it after the output has passed
// schema validation, with the compact JSON that [Schema.Parse] returned, and
// treats a non-nil error like a schema problem: it is turned into a
// [*ValidationError] by [CheckError] and sent back to the model with
// [Feedback] for a retry. A check that wants to name several problems, or
// paths other than "$", returns a *ValidationError itself.
//
// A CheckFunc must not modify v and must be safe for concurrent use: the
// agents of a batch share it. Its error message is shown to the model, so it
// should say what is wrong in words the model can act on.
type CheckFunc func(v json.RawMessage) error

// CheckError turns the error of a [CheckFunc] into a [*ValidationError], so
// that [Feedback] can render it for a retry. If err is, or wraps, a
// *ValidationError, that one is returned as it is. Any other error becomes
// one Problem{Path: "$", Message: err.Error()}, with an empty Raw that the
// caller may set. CheckError(nil) returns nil.
func CheckError(err error) *ValidationError {
	if err == nil {
		return nil
	}
	if verr, ok := errors.AsType[*ValidationError](err); ok {
		return verr
	}
	return &ValidationError{Problems: []Problem{{Path: "$", Message: err.Error()}}}
}
