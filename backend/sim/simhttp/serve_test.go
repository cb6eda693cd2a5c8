package simhttp_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// TestServe serves the simulator on a loopback listener, asks it for its
// health, and stops it through the context: Serve returns nil once the
// HTTP server and the scheduler have stopped.
func TestServe(t *testing.T) {
	s, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1) // Serve's result
	go func() { done <- simhttp.Serve(ctx, s, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health: status %d, want 200", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v after a stop, want nil", err)
		}
	case <-time.After(simhttp.ShutdownGrace + 5*time.Second):
		t.Fatal("Serve did not return after its context was done")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/health"); err == nil {
		t.Error("the listener still answers after Serve returned")
	}
}
