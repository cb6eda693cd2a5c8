package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

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
