package llm_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/llm"
)

// TestHookedBody: the hook is called before each Read until one fails
// (io.EOF included), then once with false at Close, and never again.
func TestHookedBody(t *testing.T) {
	var calls []string
	log := func(s string) { calls = append(calls, s) }
	ctx := llm.WithReadHook(context.Background(), func(reading bool) {
		if reading {
			log("hook")
		} else {
			log("done")
		}
	})
	body := llm.HookedBody(ctx, io.NopCloser(io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd"))))
	buf := make([]byte, 8)
	for {
		n, err := body.Read(buf)
		log("read " + string(buf[:n]))
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	if _, err := body.Read(buf); !errors.Is(err, io.EOF) {
		t.Errorf("read after the end: %v, want io.EOF", err)
	}
	body.Close()
	body.Close()
	want := []string{"hook", "read ab", "hook", "read cd", "hook", "read ", "done"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
}

// TestHookedBodyNoHook: without a hook the body is returned as is.
func TestHookedBodyNoHook(t *testing.T) {
	rc := io.NopCloser(strings.NewReader("x"))
	if got := llm.HookedBody(context.Background(), rc); got != rc {
		t.Errorf("HookedBody without a hook = %T, want the body itself", got)
	}
	if llm.ReadHook(context.Background()) != nil {
		t.Error("ReadHook of a bare context is not nil")
	}
}
