package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/telemetry"
)

// telemetryStopTimeout bounds the metrics server's shutdown and the final
// flush of the traces when a run ends.
const telemetryStopTimeout = 5 * time.Second

// runTelemetry is a run's metrics endpoint (--metrics-addr) and traces
// (the OTEL_* environment). Its zero parts are off: no listener without
// --metrics-addr, a no-op tracer provider without OTEL_* settings.
type runTelemetry struct {
	tp            trace.TracerProvider
	tracing       bool // tp exports: OTEL_* turned tracing on
	shutdownTrace func(context.Context) error
	tracer        *telemetry.AgentTracer
	span          trace.Span // the run's span, from serve; nil before

	metrics *telemetry.Metrics // nil without --metrics-addr
	job     string             // the job's name, the results' label; set by serve before the run
	ln      net.Listener       // --metrics-addr, bound by startTelemetry; nil without it
	srv     *http.Server
	served  chan struct{} // closed when the server's goroutine returns; nil until serve
}

// startTelemetry sets tracing up from the OTEL_* environment and binds the
// metrics address, so that a bad setting fails before the run opens
// anything. The caller must call stop.
func startTelemetry(ctx context.Context, f runFlags) (*runTelemetry, error) {
	t := &runTelemetry{}
	tp, shutdown, err := telemetry.SetupTracing(ctx)
	if err != nil {
		return nil, err
	}
	_, off := tp.(noop.TracerProvider)
	t.tp, t.tracing, t.shutdownTrace = tp, !off, shutdown
	t.tracer = telemetry.NewAgentTracer(tp)
	t.tracer.Content = f.traceContent
	if f.metricsAddr != "" {
		var lc net.ListenConfig
		if t.ln, err = lc.Listen(ctx, "tcp", f.metricsAddr); err != nil {
			_ = shutdown(ctx) // nothing was traced yet
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		t.metrics = telemetry.NewMetrics()
	}
	return t, nil
}

// onResult is the engine's OnResult: each result counted in the metrics.
// It is nil without metrics.
func (t *runTelemetry) onResult() batchagent.OnResultFunc {
	if t.metrics == nil {
		return nil
	}
	return func(r batchagent.Result) { t.metrics.Result(t.job, r) }
}

// watchCost adds the cost of r's job to the metrics, when there are
// metrics and its price is known: the cost so far and its projection, as
// the progress line shows them.
func (t *runTelemetry) watchCost(r *runner) error {
	if t.metrics == nil || !r.price.Known {
		return nil
	}
	return t.metrics.WatchCost(r.name, func() telemetry.Cost {
		spent, projected, ok := r.price.Projection(r.engine.Stats(), r.total)
		return telemetry.Cost{Spent: spent, Projected: projected, Projecting: ok}
	})
}

// serve starts serving e's metrics, as job's, on the bound address and
// returns the context to run the job under: within the run's span, its
// agents traced. It says where the metrics are on stderr unless quiet.
func (t *runTelemetry) serve(ctx context.Context, job string, e *batchagent.Engine, quiet bool, stderr io.Writer) (context.Context, error) {
	t.job = job
	if t.metrics != nil {
		if err := t.metrics.Watch(e); err != nil {
			return ctx, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", t.metrics.Exposition())
		t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		t.served = make(chan struct{})
		go func() { // owned by t: stop waits for it
			defer close(t.served)
			_ = t.srv.Serve(t.ln) // ErrServerClosed once stop shuts it down
		}()
		if !quiet {
			fmt.Fprintf(stderr, "batchagent run: metrics at http://%s/metrics\n", t.ln.Addr())
		}
	}
	if !t.tracing {
		return ctx, nil
	}
	// The engine runs every agent of the job under this context: the
	// tracer is an agent.Scope, so each agent gets its span under the
	// run's, and its turns, model and tool calls nest under that.
	ctx, t.span = t.tp.Tracer(telemetry.TracerName).Start(ctx, "run "+job, trace.WithAttributes(
		attribute.String(telemetry.AttrSpanKind, telemetry.KindChain),
		attribute.String(telemetry.AttrJob, job),
	))
	return agent.WithObserver(ctx, t.tracer), nil
}

// stop ends the run's span, stops the metrics server and flushes the
// traces, within telemetryStopTimeout. Errors are warnings for stderr:
// the run's results are written by then.
func (t *runTelemetry) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryStopTimeout)
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
