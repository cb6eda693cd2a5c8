package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/report"
)

// uiFlags are the live view's flags of `batchagent run`.
type uiFlags struct {
	addr   string        // --ui: where to serve the live page; "": nowhere
	public bool          // --ui-public: allow an address beyond loopback
	linger time.Duration // --ui-linger: serve this long after the run (0: not at all)
}

// check rejects --ui-public and --ui-linger without --ui, naming both, a
// negative --ui-linger, and an --ui address beyond loopback without
// --ui-public.
func (u uiFlags) check(changed func(string) bool) error {
	if u.addr == "" {
		for _, name := range []string{"ui-public", "ui-linger"} {
			if changed(name) {
				return fmt.Errorf("--%s applies to the live view, and --ui is not given: add --ui ADDR or drop --%s", name, name)
			}
		}
		return nil
	}
	if u.linger < 0 {
		return fmt.Errorf("--ui-linger %s: want a duration of 0 or more", u.linger)
	}
	host, _, err := net.SplitHostPort(u.addr)
	if err != nil {
		return fmt.Errorf("--ui %q: want HOST:PORT, such as 127.0.0.1:8080: %v", u.addr, err)
	}
	if !u.public && !isLoopback(host) {
		return fmt.Errorf("--ui %q listens beyond this machine (the page shows the run's counters to anyone who can reach it): use a loopback address such as 127.0.0.1:8080, or add --ui-public", u.addr)
	}
	return nil
}

// isLoopback reports whether host names only this machine: localhost or
// a loopback IP. An empty host is every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runUI is a run's sampler (recording into the state file, where there is
// one) and its live view (--ui): a report.Monitor and the flags that
// asked for it.
type runUI struct {
	f uiFlags
	m *report.Monitor
}

// startUI binds the live view's address, so that a bad one fails before
// the run opens anything. The caller must call stop.
func startUI(ctx context.Context, f uiFlags) (*runUI, error) {
	m, err := report.Listen(ctx, f.addr)
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	return &runUI{f: f, m: m}, nil
}

// onResult is the engine's OnResult part of the live view; nil without
// --ui.
func (u *runUI) onResult() batchagent.OnResultFunc { return u.m.OnResult() }

// start samples r's engine while it runs, recording the samples into r's
// state file, where it has one, and serves the live view, where --ui asks
// for it. It does nothing with neither.
func (u *runUI) start(ctx context.Context, r *jobrun.Run, quiet bool, stderr io.Writer) error {
	price := r.Price()
	info := report.Info{Job: r.Name(), Model: price.Model}
	if price.Known {
		p := price.Price
		info.Price, info.PriceSource = &p, price.Source
	}
	cfg := report.SamplerConfig{Stats: r.Engine().Stats, Info: info, Inputs: r.Total(), Persist: r.SamplePersist()}
	if err := u.m.Start(ctx, cfg); err != nil {
		return err
	}
	if u.m.Sampling() {
		r.OnEnd(func() {
			if err := u.m.StopSampling(); err != nil {
				fmt.Fprintln(stderr, "batchagent run: warning:", err)
			}
		})
	}
	if u.m.Serving() {
		fmt.Fprintf(stderr, "batchagent run: live view at http://%s/\n", u.m.Addr())
	}
	return nil
}

// stopSampling takes the last sample, records it and waits for the
// sampler; it returns what recording the samples met. Once is enough.
func (u *runUI) stopSampling() error { return u.m.StopSampling() }

// linger keeps the live view up after the run for --ui-linger (or until
// SIGINT, SIGTERM or ctx ends, whichever is first). Without --ui-linger it
// returns at once: the live view ends with the run.
func (u *runUI) linger(ctx context.Context, quiet bool, stderr io.Writer) {
	if !u.m.Serving() || u.f.linger == 0 {
		return
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, u.f.linger)
	defer cancel()
	if !quiet {
		fmt.Fprintf(stderr, "batchagent run: the live view stays at http://%s/ for %s (Ctrl-C ends it)\n", u.m.Addr(), u.f.linger)
	}
	<-ctx.Done()
}

// stop stops the live view's server. Errors are warnings: the run's
// results are written by then.
func (u *runUI) stop() error { return u.m.Stop() }

// chainResults returns an OnResult calling each of fs that is not nil, in
// order; nil when all are.
func chainResults(fs ...batchagent.OnResultFunc) batchagent.OnResultFunc {
	var set []batchagent.OnResultFunc
	for _, f := range fs {
		if f != nil {
			set = append(set, f)
		}
	}
	switch len(set) {
	case 0:
		return nil
	case 1:
		return set[0]
	}
	return func(r batchagent.Result) {
		for _, f := range set {
			f(r)
		}
	}
}
