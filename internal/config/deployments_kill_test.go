package config_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
)

// simDecodeStep is the deployments' time per token: long enough (about
// 40ms a call) that the upstream, not the test's own CPU, bounds the
// calls in flight, so the split follows the deployments' limits.
const simDecodeStep = 5 * time.Millisecond

// simChildEnv, when set to an address, makes the test binary a sim+http
// server on it (see simChild) instead of running the tests.
const simChildEnv = "BATCHAGENT_CONFIG_TEST_SIM_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(simChildEnv); addr != "" {
		os.Exit(simChild(addr))
	}
	os.Exit(m.Run())
}

// simChild serves a sim+http server on addr, says "listening on ADDR" on
// stderr once it does, and serves until it is killed (or told to stop by
// SIGTERM/SIGINT). It returns the exit code.
func simChild(addr string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := simhttp.New(simhttp.Config{Model: sim.Config{Seed: 2, ToolTurns: -1},
		MaxSeqs: 64, DecodeStep: simDecodeStep, DecodeStepPerSeq: time.Microsecond, PrefillPerToken: time.Microsecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "listening on", ln.Addr())
	hs := &http.Server{Handler: srv}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(ln) }) // ends when Close below closes ln
	<-ctx.Done()
	_ = hs.Close()
	wg.Wait()
	return 0
}

// procDeployment is a sim+http deployment running as a child process
// (the test binary re-executed as simChild) on a fixed port: kill sends
// it SIGKILL, so its calls in flight are cut by the kernel, and restart
// starts a new process on the same port.
type procDeployment struct {
	t    *testing.T
	addr string

	mu   sync.Mutex // protects cmd and done
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited and been reaped
}

// newProcDeployment starts a child sim+http server on a free port.
func newProcDeployment(t *testing.T) *procDeployment {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &procDeployment{t: t, addr: addr}
	d.restart()
	t.Cleanup(d.kill)
	return d
}

// restart starts the child on d's port and returns once it listens.
func (d *procDeployment) restart() {
	d.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"="+d.addr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		d.t.Fatalf("sim child on %s: first line %q, %v", d.addr, line, err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, r) // the pipe closes when the process exits
		_ = cmd.Wait()
		close(done)
	}()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
}

// kill sends the child SIGKILL and waits until it is gone. It does
// nothing when the child has already exited.
func (d *procDeployment) kill() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Errorf("kill sim child: %v", err)
	}
	<-done
}

// TestServeDeploymentsFailover: the must-show of the gateway's
// deployments, with a real death. One model on two sim+http deployments,
// a in process (max_inflight 8) and b a separate process (max_inflight 4):
// under load the calls split about 2:1; b SIGKILLed mid-run, with calls in
// flight that the kernel cuts mid-answer, costs the 1,000 requests no
// error (the cut calls run again on a); b's breaker opens, and closes
// again once b is restarted on its port.
func TestServeDeploymentsFailover(t *testing.T) {
	a, b := newDeployment(t, 1), newProcDeployment(t)
	if failed := failoverScenario(t, a, b); failed < 1 {
		t.Errorf("b failed %v calls, want at least one: the kill cut nothing", failed)
	}
}
