package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

// ToolSet is a job file's tools opened: the tools, their policies by
// tool name, and what must be closed after the run (MCP sessions,
// databases, the roots of file tools).
type ToolSet struct {
	// Tools are the built-in tools, in file order, then each MCP server's.
	Tools []tool.Tool
	// Policies are the tools' policies, by tool name: a job.Def's
	// ToolPool.Policies.
	Policies map[string]tool.Policy
	// Closers are what Close closes, last first.
	Closers []io.Closer
}

// OpenTools builds the job file's built-in tools and connects its MCP
// servers. On error, whatever was opened is closed.
func (j *Job) OpenTools(ctx context.Context) (_ *ToolSet, err error) {
	b := &ToolSet{Policies: map[string]tool.Policy{}}
	defer func() {
		if err != nil {
			_ = b.Close() // the build error is the one to report
		}
	}()
	for i := range j.Tools {
		s := &j.Tools[i]
		t, res, err := s.Build()
		if res != nil {
			b.Closers = append(b.Closers, res)
		}
		if err != nil {
			return nil, fmt.Errorf("tools[%d] %s: %w", i, s.Name, err)
		}
		b.Tools = append(b.Tools, t)
		b.Policies[t.Spec().Name] = s.Policy
		if c, ok := t.(io.Closer); ok {
			b.Closers = append(b.Closers, c)
		}
	}
	for i, m := range j.MCP {
		c, err := mcptool.Connect(ctx, m.Server)
		if err != nil {
			return nil, fmt.Errorf("mcp[%d] %s: %w", i, m.Server.Name, err)
		}
		b.Closers = append(b.Closers, c)
		for _, t := range c.Tools() {
			b.Tools = append(b.Tools, t)
			b.Policies[t.Spec().Name] = m.Policy
		}
	}
	return b, nil
}

// Close closes the tools' resources, last opened first, and returns their
// errors (an MCP server's exit status, say). A second Close does nothing.
func (b *ToolSet) Close() error {
	var errs []error
	for _, c := range slices.Backward(b.Closers) {
		errs = append(errs, c.Close())
	}
	b.Closers = nil
	return errors.Join(errs...)
}
