package admission_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchagent/batchagent/admission"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/sched"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    admission.Config
		want string
	}{
		{admission.Config{MaxInflight: -1}, "negative max inflight -1"},
		{admission.Config{RateLimit: admission.RateLimit{TPM: -2}}, "negative rate limit (rpm 0, tpm -2)"},
		{admission.Config{RateLimit: admission.RateLimit{OTPM: -3}}, "negative output-token rate limit (otpm -3)"},
		{admission.Config{Policy: "srpt"}, `unknown policy "srpt" (known: fifo, turns, las)`},
		{admission.Config{NoStartWindow: true, StartWindow: time.Second}, "no start window contradicts start window 1s"},
		{admission.Config{PauseBackoff: job.Backoff{Max: -time.Second}}, "negative pause backoff"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := (admission.Config{Policy: admission.PolicyLAS, MaxInflight: 4}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// An in-process model declares nothing: its calls are not gated unless a
// limit is set, and the shared limits' errors name the backend.
func TestGateInProcess(t *testing.T) {
	m, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := admission.Config{NoStartWindow: true}.Gate(m, "sim")
	if err != nil || g.Gated || g.Config.StartWindow != 0 || g.Config.Probe != nil {
		t.Errorf("plain in-process gate = %+v, %v; want ungated, no start window, no probe", g, err)
	}
	g, err = admission.Config{MaxInflight: 3, Policy: admission.PolicyFIFO}.Gate(m, "sim")
	if err != nil || !g.Gated || g.Config.Limit != 3 || g.Config.Policy != sched.PolicyFIFO {
		t.Errorf("limited gate = %+v, %v; want gated, limit 3, fifo", g, err)
	}
	boom := errors.New("redis down")
	_, err = admission.Config{SharedInflight: func(admission.Backend) (sched.SharedSlots, error) { return nil, boom }}.Gate(m, "sim")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `shared inflight limit of backend "sim"`) {
		t.Errorf("shared slots error = %v", err)
	}
}

func TestBackendValidate(t *testing.T) {
	if err := (admission.Backend{Name: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), `backend "x": no model`) {
		t.Errorf("no model: %v", err)
	}
	if err := (admission.Breaker{Failures: -1}).Validate(); err == nil {
		t.Error("negative breaker: no error")
	}
}
