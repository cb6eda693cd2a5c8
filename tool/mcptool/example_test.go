package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// Example connects to an MCP server over streamable HTTP and calls its tool
// through a tool pool, as the agents of a job do. A stdio server is
// configured with Command instead of URL.
func Example() {
	// An MCP server with one tool, served in-process for the example.
	srv := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
			if in.Name == "" {
				return nil, nil, errors.New("name is empty")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	ctx := context.Background()
	c, err := mcptool.Connect(ctx, mcptool.ServerConfig{Name: "greeter", URL: hs.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	for _, t := range c.Tools() {
		s := t.Spec()
		fmt.Printf("%s: %s %s\n", s.Name, s.Description, s.Parameters)
	}
	// The tools join a pool (or a batchagent.Def's Tools) like any other.
	pool, err := tool.NewPool(c.Tools(), tool.PoolConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, args := range []string{`{"name":"Ada"}`, `{"name":""}`} {
		out, err := pool.Call(ctx, "greet", json.RawMessage(args))
		fmt.Printf("%s → %q, %v\n", args, out, err)
	}
	// Output:
	// greet: Greets someone. {"additionalProperties":false,"properties":{"name":{"description":"who to greet","type":"string"}},"required":["name"],"type":"object"}
	// {"name":"Ada"} → "Hello, Ada!", <nil>
	// {"name":""} → "", tool greet: name is empty
}
