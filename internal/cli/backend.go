package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/batchagent/batchagent/backend/anthropic"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

// openBackend resolves a backend URL into a Model. Each scheme maps to its
// constructor here, explicitly: no registry filled from init. keyEnv names
// the environment variable of the API key; empty means the backend's
// usual one. getenv reads the environment.
func openBackend(ctx context.Context, raw, model, keyEnv string, getenv func(string) string) (llm.Model, error) {
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

// schemes lists the backend URL schemes, for messages.
var schemes = []string{"sim", "sim+http", "openai", "openai+http", "openai+https", "vllm", "sglang", "llamacpp", "ollama", "anthropic", "anthropic+http", "anthropic+https", "bedrock"}

// environ reads the process environment.
var environ = os.Getenv

// builtTools are a job file's tools, their policies, and what must be
// closed after the run (MCP sessions, databases, the roots of file tools).
type builtTools struct {
	tools    []tool.Tool
	policies map[string]tool.Policy
	closers  []io.Closer
}

// buildTools builds the job file's built-in tools and connects its MCP
// servers. On error, whatever was opened is closed.
func buildTools(ctx context.Context, cj *config.Job) (_ *builtTools, err error) {
	b := &builtTools{policies: map[string]tool.Policy{}}
	defer func() {
		if err != nil {
			_ = b.close() // the build error is the one to report
		}
	}()
	for i := range cj.Tools {
		s := &cj.Tools[i]
		t, res, err := s.Build()
		if res != nil {
			b.closers = append(b.closers, res)
		}
		if err != nil {
			return nil, fmt.Errorf("tools[%d] %s: %w", i, s.Name, err)
		}
		b.tools = append(b.tools, t)
		b.policies[t.Spec().Name] = s.Policy
		if c, ok := t.(io.Closer); ok {
			b.closers = append(b.closers, c)
		}
	}
	for i, m := range cj.MCP {
		c, err := mcptool.Connect(ctx, m.Server)
		if err != nil {
			return nil, fmt.Errorf("mcp[%d] %s: %w", i, m.Server.Name, err)
		}
		b.closers = append(b.closers, c)
		for _, t := range c.Tools() {
			b.tools = append(b.tools, t)
			b.policies[t.Spec().Name] = m.Policy
		}
	}
	return b, nil
}

// close closes the tools' resources, last opened first, and returns their
// errors (an MCP server's exit status, say).
func (b *builtTools) close() error {
	var errs []error
	for _, c := range slices.Backward(b.closers) {
		errs = append(errs, c.Close())
	}
	b.closers = nil
	return errors.Join(errs...)
}
