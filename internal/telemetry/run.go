package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
)

// StopTimeout bounds the metrics server's shutdown and the final
// flush of the traces when a run ends.
const StopTimeout = 5 * time.Second

// Run is the telemetry of one job's run: its metrics endpoint (a
// Prometheus exposition at /metrics, on RunOptions.MetricsAddr) and its
// traces (set up from the OTEL_* environment: see [SetupTracing]). Its
// parts are off unless asked for: no listener without a metrics address, a
// no-op tracer provider without OTEL_* settings. The caller must call
// [Run.Stop].
type Run struct {
	tp            trace.TracerProvider
	tracing       bool // tp exports: OTEL_* turned tracing on
	shutdownTrace func(context.Context) error
	tracer        *AgentTracer
	span          trace.Span // the run's span, from serve; nil before

	metrics *Metrics     // nil without --metrics-addr
	job     string       // the job's name, the results' label; set by Serve before the run
	ln      net.Listener // the metrics address, bound by StartRun; nil without it
	srv     *http.Server
	served  chan struct{} // closed when the server's goroutine returns; nil until serve
}

// RunOptions are the settings of a run's telemetry.
type RunOptions struct {
	// MetricsAddr is the address to serve metrics on (host:port); "" for
	// none.
	MetricsAddr string
	// TraceContent records prompts and answers in the agents' spans
	// (AgentTracer.Content).
	TraceContent bool
}

// StartRun sets tracing up from the OTEL_* environment and binds the
// metrics address, so that a bad setting fails before the run opens
// anything. The caller must call Stop.
func StartRun(ctx context.Context, o RunOptions) (*Run, error) {
	t := &Run{}
	tp, shutdown, err := SetupTracing(ctx)
	if err != nil {
		return nil, err
	}
	_, off := tp.(noop.TracerProvider)
	t.tp, t.tracing, t.shutdownTrace = tp, !off, shutdown
	t.tracer = NewAgentTracer(tp)
	t.tracer.Content = o.TraceContent
	if o.MetricsAddr != "" {
		var lc net.ListenConfig
		if t.ln, err = lc.Listen(ctx, "tcp", o.MetricsAddr); err != nil {
			_ = shutdown(ctx) // nothing was traced yet
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		t.metrics = NewMetrics()
	}
	return t, nil
}

// OnResult is the engine's OnResult: each result counted in the metrics.
// It is nil without metrics.
func (t *Run) OnResult() batchagent.OnResultFunc {
	if t.metrics == nil {
		return nil
	}
	return func(r batchagent.Result) { t.metrics.Result(t.job, r) }
}

// WatchCost adds the cost of job to the metrics, read from cost, when
// there are metrics: the cost so far and its projection, as the progress
// line shows them. A nil cost (the price is not known) adds nothing.
func (t *Run) WatchCost(job string, cost func() Cost) error {
	if t.metrics == nil || cost == nil {
		return nil
	}
	return t.metrics.WatchCost(job, cost)
}

// Serve starts serving e's metrics, as job's, on the bound address and
// returns the context to run the job under: within the run's span, its
// agents traced.
func (t *Run) Serve(ctx context.Context, job string, e *batchagent.Engine) (context.Context, error) {
	t.job = job
	if t.metrics != nil {
		if err := t.metrics.Watch(e); err != nil {
			return ctx, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", t.metrics.Exposition())
		t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		t.served = make(chan struct{})
		go func() { // owned by t: Stop waits for it
			defer close(t.served)
			_ = t.srv.Serve(t.ln) // ErrServerClosed once Stop shuts it down
		}()
	}
	if !t.tracing {
		return ctx, nil
	}
	// The engine runs every agent of the job under this context: the
	// tracer is an agent.Scope, so each agent gets its span under the
	// run's, and its turns, model and tool calls nest under that.
	ctx, t.span = t.tp.Tracer(TracerName).Start(ctx, "run "+job, trace.WithAttributes(
		attribute.String(AttrSpanKind, KindChain),
		attribute.String(AttrJob, job),
	))
	return agent.WithObserver(ctx, t.tracer), nil
}

// MetricsAddr returns the address metrics are served on, or nil without
// one.
func (t *Run) MetricsAddr() net.Addr {
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

// Stop ends the run's span, stops the metrics server and flushes the
// traces, within a few seconds. Errors are warnings: the run's results are
// written by then.
func (t *Run) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
	defer cancel()
	var errs []error
	if t.span != nil {
		t.span.End()
	}
	if t.srv != nil {
		if err := t.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("metrics server: %w", err))
		}
		<-t.served
	} else if t.ln != nil {
		if err := t.ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metrics listener: %w", err))
		}
	}
	if err := t.shutdownTrace(ctx); err != nil {
		errs = append(errs, fmt.Errorf("traces: %w", err))
	}
	return errors.Join(errs...)
}
