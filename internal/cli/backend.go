package cli

import (
	"fmt"
	"net/url"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// openBackend resolves a backend URL into a Model. Each scheme maps to its
// constructor here, explicitly: no registry filled from init.
func openBackend(raw string) (llm.Model, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", raw, err)
	}
	switch u.Scheme {
	case "sim":
		cfg, err := sim.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		return sim.New(cfg)
	default:
		return nil, fmt.Errorf("backend %q: unsupported scheme %q (supported: sim)", raw, u.Scheme)
	}
}

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
