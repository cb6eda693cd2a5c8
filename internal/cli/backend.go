package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// openBackend resolves a backend URL into a Model. Each scheme maps to its
// constructor here, explicitly: no registry filled from init. keyEnv names
// the environment variable of the API key; empty means the backend's
// usual one. getenv reads the environment.
func openBackend(ctx context.Context, raw, model, keyEnv string, getenv func(string) string) (llm.Model, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", raw, err)
	}
	key := func(def string) llm.Secret {
		if keyEnv == "" {
			keyEnv = def
		}
		return llm.Secret(getenv(keyEnv))
	}
	switch scheme := u.Scheme; scheme {
	case "sim":
		cfg, err := sim.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		return sim.New(cfg)
	case "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "sim+http":
		cfg, err := openai.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		cfg.APIKey = key("OPENAI_API_KEY")
		if scheme == "openai" && cfg.APIKey == "" {
			return nil, fmt.Errorf("backend %s: no API key: set %s", raw, keyEnv)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
		return openai.New(cfg)
	case "anthropic", "anthropic+http", "anthropic+https":
		cfg, err := anthropic.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		cfg.APIKey = key("ANTHROPIC_API_KEY")
		if scheme == "anthropic" && cfg.APIKey == "" {
			return nil, fmt.Errorf("backend %s: no API key: set %s", raw, keyEnv)
		}
		if cfg.Model == "" {
			cfg.Model = model
		}
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
		return nil, fmt.Errorf("backend %q: unsupported scheme %q (supported: %s)", raw, scheme, strings.Join(schemes, ", "))
	}
}

// schemes lists the backend URL schemes, for messages.
var schemes = []string{"sim", "sim+http", "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "anthropic", "anthropic+http", "anthropic+https", "bedrock"}

// environ reads the process environment.
var environ = os.Getenv

// buildTools builds the job file's built-in tools.
func buildTools(specs []config.Tool) ([]tool.Tool, error) {
	var tools []tool.Tool
	for i, s := range specs {
		switch s.Name {
		case "read_file":
			cacheable := true // a batch reads the same files over and over
			if s.Cacheable != nil {
				cacheable = *s.Cacheable
			}
			t, err := tool.ReadFile(tool.ReadFileConfig{Roots: s.Roots, MaxBytes: s.MaxBytes, Cacheable: cacheable})
			if err != nil {
				return nil, fmt.Errorf("tools[%d]: %w", i, err)
			}
			tools = append(tools, t)
		default:
			return nil, fmt.Errorf("tools[%d]: unknown tool %q", i, s.Name)
		}
	}
	return tools, nil
}
