package config

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/anthropic"
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
func OpenBackend(ctx context.Context, raw, model, keyEnv string, getenv func(string) string) (llm.Model, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Not the URL itself: its query may hold a key.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
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
	switch scheme := u.Scheme; scheme {
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
		return openai.New(cfg)
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
		return anthropic.New(cfg)
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
		// Not the URL itself: its query may hold a key.
		return nil, fmt.Errorf("backend: unsupported scheme %q (supported: %s)", scheme, strings.Join(schemes, ", "))
	}
}

// OpenFallbacks opens the backend of each fallback tier of a job file
// with OpenBackend, as the job's own backend is opened (its model, its
// api_key_env, getenv), into the fallbacks of the job's Def, in order. An
// error names the tier as the file does, "fallbacks[N]", and, like
// OpenBackend's, never the URL's path or query, where a key may be.
func OpenFallbacks(ctx context.Context, fbs []FallbackBackend, getenv func(string) string) ([]batchagent.Fallback, error) {
	var out []batchagent.Fallback
	for i, f := range fbs {
		m, err := OpenBackend(ctx, f.Backend, f.Model, f.APIKeyEnv, getenv)
		if err != nil {
			return nil, fmt.Errorf("fallbacks[%d]: %w", i, err)
		}
		out = append(out, batchagent.Fallback{Model: m, ModelName: f.Model})
	}
	return out, nil
}

// schemes lists the backend URL schemes, for messages.
var schemes = []string{"sim", "sim+http", "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "anthropic", "anthropic+http", "anthropic+https", "bedrock"}

// BackendAddr returns a backend URL as scheme://host:port, without its
// path, query or user info, which may hold secrets: for messages.
func BackendAddr(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(backend URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host
}
