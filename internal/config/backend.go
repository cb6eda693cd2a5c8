package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/telemetry"
	"github.com/batchagent/batchagent/llm"
)

// OpenBackend resolves a backend URL into a Model for model (the name a
// URL without one is given). Each scheme maps to its constructor here,
// explicitly: no registry filled from init. keyEnv names the environment
// variable of the API key; empty means the backend's usual one. getenv
// reads the environment. An error never holds the URL's path, query or
// user info, where a key may be.
//
// A plain http:// or https:// URL (http://localhost:8000/v1) is an
// OpenAI-compatible server, as openai+http:// and openai+https:// are. A
// scheme that is none of the supported ones is an error that suggests the
// nearest one ("opneai://": did you mean "openai"?), or a scheme for a URL
// that has none ("localhost:8000/v1").
func OpenBackend(ctx context.Context, raw, model, keyEnv string, getenv func(string) string) (llm.Model, error) {
	return OpenBackendWith(ctx, raw, model, keyEnv, getenv, BackendOptions{})
}

// BackendOptions are what OpenBackendWith takes beyond OpenBackend's
// arguments: how the calls are delivered.
type BackendOptions struct {
	// Delivery is the job file's delivery key; nil: the URL's mode alone
	// (?mode=batch) says.
	Delivery *DeliveryConfig
	// Journal is the file of a batch-delivered backend's journal (see
	// batchmode.Config.Journal); "": in memory.
	Journal string
	// Logger receives a batch-delivered backend's log; nil: none.
	Logger *slog.Logger
}

// OpenBackendWith is OpenBackend with the job's delivery: with batch
// delivery (o.Delivery, or the URL's ?mode=batch), an OpenAI (openai://,
// openai+http(s)://, sim+http://) or Anthropic backend's Model is a
// *batchmode.Model over the provider's batch API, which the caller
// closes; any other backend is an error.
func OpenBackendWith(ctx context.Context, raw, model, keyEnv string, getenv func(string) string, o BackendOptions) (llm.Model, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, fmt.Errorf("backend: empty URL (supported schemes: %s)", strings.Join(schemes, ", "))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not the URL itself: its query may hold a key.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		if !strings.Contains(raw, "://") {
			return nil, fmt.Errorf("backend: invalid URL: %w (a URL starts with its scheme, as in http://HOST:PORT/v1 or sim://)", err)
		}
		return nil, fmt.Errorf("backend: invalid URL: %w", err)
	}
	key := func(def string) llm.Secret {
		if keyEnv == "" {
			keyEnv = def
		}
		return llm.Secret(getenv(keyEnv))
	}
	// shown names the backend in errors by scheme and host alone: the
	// URL's path, query or user info may hold a key.
	shown := u.Scheme + "://" + u.Host
	scheme := u.Scheme
	batch := u.Query().Get("mode") == deliveryBatch
	if o.Delivery != nil {
		if batch && !o.Delivery.Batch {
			return nil, fmt.Errorf("backend %s: the URL says mode=batch, the job's delivery says %s: remove one", shown, deliveryRealtime)
		}
		batch = o.Delivery.Batch
	}
	if batch && !slices.Contains(batchSchemes, scheme) {
		return nil, fmt.Errorf("backend %s: %s has no batch API (delivery: batch takes %s)", shown, u.Scheme+"://", strings.Join(batchSchemes, ", "))
	}
	if scheme == "http" || scheme == "https" {
		// An OpenAI-compatible server, named as people write its address.
		if u.Host == "" || u.Opaque != "" {
			return nil, fmt.Errorf("backend %s: no host: write %s://HOST:PORT/v1", scheme+"://", scheme)
		}
		raw, scheme = "openai+"+raw, "openai+"+scheme
	}
	switch scheme {
	case "sim":
		cfg, err := sim.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
		return sim.New(cfg)
	case "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "sim+http":
		cfg, err := openai.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		cfg.APIKey = key("OPENAI_API_KEY")
		if scheme == "openai" && cfg.APIKey == "" {
			return nil, fmt.Errorf("backend %s: no API key: set %s", shown, keyEnv)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
		// A call made under a span (OTEL_* set) carries its traceparent;
		// otherwise the wrapper adds nothing.
		cfg.WrapTransport = telemetry.Transport
		if !batch {
			return openai.New(cfg)
		}
		cfg.Mode = ""
		rt, err := openai.New(cfg)
		if err != nil {
			return nil, err
		}
		cfg.Mode = openai.ModeBatch
		p, err := openai.NewBatch(cfg)
		if err != nil {
			return nil, err
		}
		return openBatch(p, rt, o)
	case "anthropic", "anthropic+http", "anthropic+https":
		cfg, err := anthropic.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		cfg.APIKey = key("ANTHROPIC_API_KEY")
		if scheme == "anthropic" && cfg.APIKey == "" {
			return nil, fmt.Errorf("backend %s: no API key: set %s", shown, keyEnv)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
		cfg.WrapTransport = telemetry.Transport
		if !batch {
			return anthropic.New(cfg)
		}
		cfg.Mode = ""
		rt, err := anthropic.New(cfg)
		if err != nil {
			return nil, err
		}
		cfg.Mode = anthropic.ModeBatch
		p, err := anthropic.NewBatch(cfg)
		if err != nil {
			return nil, err
		}
		return openBatch(p, rt, o)
	case "bedrock":
		cfg, err := bedrock.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
		return bedrock.New(ctx, cfg) // credentials: the AWS default chain
	default:
		return nil, unsupported(u)
	}
}

// batchSchemes are the backends with a batch API, for delivery: batch.
var batchSchemes = []string{"openai", "openai+http", "openai+https", "sim+http", "anthropic", "anthropic+http", "anthropic+https"}

// openBatch returns the batch-delivered Model over p, declaring the
// capabilities of rt, the provider's real-time client, with o's journal
// and the job's delivery settings.
func openBatch(p batchmode.Provider, rt llm.Model, o BackendOptions) (llm.Model, error) {
	cfg := batchmode.Config{Journal: o.Journal, Logger: o.Logger}
	if c, ok := rt.(llm.Capable); ok {
		cfg.Capabilities = c.Capabilities()
	}
	if d := o.Delivery; d != nil {
		cfg.Linger, cfg.PollEvery, cfg.MinLines, cfg.MaxEnqueuedTokens = d.Linger, d.PollEvery, d.MinLines, d.MaxEnqueuedTokens
	}
	return batchmode.New(p, cfg)
}

// unsupported returns the error for the URL u, whose scheme is none of
// schemes: with the nearest scheme for a misspelt one, or a complete URL
// for an address written without a scheme ("localhost:8000/v1",
// "//host:8000"). It names the scheme and the host alone, never the URL's
// path, query or user info, where a key may be.
func unsupported(u *url.URL) error {
	supported := strings.Join(schemes, ", ")
	switch {
	case u.Scheme == "" && u.Host != "":
		return fmt.Errorf("backend: URL has no scheme (did you mean %q?; supported: %s)", "http://"+u.Host+"/v1", supported)
	case u.Scheme == "":
		return fmt.Errorf("backend: URL has no scheme, as in http://localhost:8000/v1 or sim:// (supported: %s)", supported)
	case u.Host == "" && u.Opaque != "" && u.Opaque[0] >= '0' && u.Opaque[0] <= '9':
		// "localhost:8000/v1": url.Parse reads the host as the scheme.
		port, _, _ := strings.Cut(u.Opaque, "/")
		port, _, _ = strings.Cut(port, "?")
		if strings.Trim(port, "0123456789") == "" {
			return fmt.Errorf("backend: URL has no scheme (did you mean %q?; supported: %s)", "http://"+u.Scheme+":"+port+"/v1", supported)
		}
	}
	msg := fmt.Sprintf("backend: unsupported scheme %q", u.Scheme)
	if s := suggest(u.Scheme, schemes); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return fmt.Errorf("%s (supported: %s)", msg, supported)
}

// OpenFallbacks opens the backend of each fallback tier of a job file
// with OpenBackend, as the job's own backend is opened (its model, its
// api_key_env, getenv), into the fallbacks of the job's Def, in order. An
// error names the tier as the file does, "fallbacks[N]", and, like
// OpenBackend's, never the URL's path or query, where a key may be.
func OpenFallbacks(ctx context.Context, fbs []FallbackBackend, getenv func(string) string) ([]batchagent.Fallback, error) {
	var out []batchagent.Fallback
	for i, f := range fbs {
		if BatchURL(f.Backend) {
			// A tier takes over when the tier before fails now: a batch
			// answers in hours.
			return nil, fmt.Errorf("fallbacks[%d]: backend %s: mode=batch is for the job's own backend, not a fallback tier", i, BackendAddr(f.Backend))
		}
		m, err := OpenBackend(ctx, f.Backend, f.Model, f.APIKeyEnv, getenv)
		if err != nil {
			return nil, fmt.Errorf("fallbacks[%d]: %w", i, err)
		}
		out = append(out, batchagent.Fallback{Model: m, ModelName: f.Model})
	}
	return out, nil
}

// schemes lists the backend URL schemes, for messages.
var schemes = []string{"sim", "sim+http", "http", "https", "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "anthropic", "anthropic+http", "anthropic+https", "bedrock"}

// BackendAddr returns a backend URL as scheme://host:port, without its
// path, query or user info, which may hold secrets: for messages.
func BackendAddr(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(backend URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host
}
