package job

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrPanic is matched (errors.Is) by every [*PanicError]: the cause of an
// agent whose user-supplied code panicked. Its class is "panic" and its
// kind [KindPanic].
var ErrPanic = errors.New("panic in user code")

// PanicError is a panic recovered from code the engine runs but did not
// write: a fallback Func, a Check, a custom llm.Model's Generate or Stream,
// an OnResult hook. It fails the one agent whose call panicked; the engine
// goes on. It answers errors.Is for [ErrPanic] only, whatever Value is, so
// that a panic is never mistaken for a retryable failure.
type PanicError struct {
	// Site names the code that panicked: "fallback 2 (func)", "check",
	// "model", "on_result".
	Site string
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as debug.Stack returns it.
	// It is not part of Error's text; the engine logs it at Error.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.Site, e.Value) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Recovered returns a *PanicError of site for v, a value recover returned,
// with the current goroutine's stack; nil when v is nil (no panic). Call it
// in the deferred function that recovered.
func Recovered(site string, v any) error {
	if v == nil {
		return nil
	}
	return &PanicError{Site: site, Value: v, Stack: debug.Stack()}
}
