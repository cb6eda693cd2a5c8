package report

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
)

// monitorStopTimeout bounds the live view's shutdown once the run is over.
const monitorStopTimeout = 5 * time.Second

// A Monitor is a run's [Sampler], recording into the run's state file
// where it has one, and its live view: a [Live] page served on an address
// bound before the run opens anything. Its parts not asked for are off.
// [Listen] makes one; the caller starts it once the engine exists, stops
// the sampling when the run ends ([Monitor.StopSampling]) and stops the
// server when it is done serving ([Monitor.Stop]).
type Monitor struct {
	ln net.Listener // bound by Listen; nil without an address

	sampler    *Sampler
	live       *Live              // the live view; nil without an address
	cancel     context.CancelFunc // stops the sampler
	sampled    chan error         // the sampler's Run result, once it returns
	srv        *http.Server
	served     chan struct{}      // closed when the server's goroutine returns
	cancelBase context.CancelFunc // ends the open event streams
	stopOnce   sync.Once
}

// Listen binds addr (host:port) for the live view, so that a bad address
// fails before the run opens anything; with addr "" the monitor serves
// nothing. The caller must call Stop.
func Listen(ctx context.Context, addr string) (*Monitor, error) {
	m := &Monitor{}
	if addr == "" {
		return m, nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	m.ln = ln
	return m, nil
}

// Addr is the live view's address; nil without one.
func (m *Monitor) Addr() net.Addr {
	if m.ln == nil {
		return nil
	}
	return m.ln.Addr()
}

// OnResult is the engine's OnResult part of the live view: each result
// drawn on the timeline and kept for the results table. It is nil without a live view. The sampler it
// feeds is made by Start, before the engine runs.
func (m *Monitor) OnResult() batchagent.OnResultFunc {
	if m.ln == nil {
		return nil
	}
	return func(r batchagent.Result) {
		m.sampler.Result(r)
		m.live.Result(&r)
	}
}

// Start samples the run's engine as cfg says while it runs, recording the
// samples through cfg.Persist where it is set, and serves the live view,
// where Listen bound an address; ctx bounds the sampling. It does nothing
// with neither. It returns the error of [NewSampler].
func (m *Monitor) Start(ctx context.Context, cfg SamplerConfig) error {
	if m.ln == nil && cfg.Persist == nil {
		return nil
	}
	s, err := NewSampler(cfg)
	if err != nil {
		return err
	}
	m.sampler = s
	sctx, cancel := context.WithCancel(ctx)
	m.cancel, m.sampled = cancel, make(chan error, 1) // buffered: Run's one result
	go func() { m.sampled <- s.Run(sctx) }()          // owned by m: StopSampling waits for it
	if m.ln == nil {
		return nil
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	m.cancelBase = cancelBase
	m.live = NewLive(s)
	m.srv = &http.Server{Handler: m.live, ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	m.served = make(chan struct{})
	go func() { // owned by m: Stop waits for it
		defer close(m.served)
		_ = m.srv.Serve(m.ln) // ErrServerClosed once Stop shuts it down
	}()
	return nil
}

// Sampling reports whether Start started a sampler.
func (m *Monitor) Sampling() bool { return m.sampler != nil }

// Serving reports whether Start started the live view's server.
func (m *Monitor) Serving() bool { return m.srv != nil }

// StopSampling takes the last sample, records it and waits for the
// sampler; it returns what recording the samples met. Calls after the
// first, and calls with no sampler, return nil. The live view goes on
// serving the final state.
func (m *Monitor) StopSampling() error {
	var err error
	m.stopOnce.Do(func() {
		if m.cancel == nil {
			return
		}
		m.cancel()
		err = <-m.sampled
	})
	return err
}

// Stop stops the live view's server, ending its event streams, or closes
// its unused listener. The caller stops the sampling first.
func (m *Monitor) Stop() error {
	var errs []error
	if m.srv != nil {
		m.cancelBase() // ends the event streams, so Shutdown need not wait for them
		ctx, cancel := context.WithTimeout(context.Background(), monitorStopTimeout)
		defer cancel()
		if err := m.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("live view: %w", err))
		}
		<-m.served
	} else if m.ln != nil {
		if err := m.ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("live view: %w", err))
		}
	}
	return errors.Join(errs...)
}
