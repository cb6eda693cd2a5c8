package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// serverEnv selects what the test binary does when it is run again as a
// child process: "1" serves the test MCP server over stdin and stdout,
// "exit" fails at once, "hang" reads stdin and never answers.
const serverEnv = "MCPTOOL_TEST_SERVER"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(serverEnv); mode {
	case "":
		goleak.VerifyTestMain(m)
	case "1":
		os.Exit(serveStdio())
	case "exit":
		fmt.Fprintln(os.Stderr, "no server here")
		os.Exit(2)
	case "hang":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", serverEnv, mode)
		os.Exit(2)
	}
}

// serveStdio runs the test server over stdin and stdout until the client
// closes stdin, and returns the exit code.
func serveStdio() int {
	var st serverState
	if err := newTestServer(&st).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	return 0
}

// serverState counts what a test server saw.
type serverState struct {
	mu          sync.Mutex      // protects the fields below
	echoes      int             // echo calls
	texts       map[string]bool // the texts echoed
	inflight    int             // slow calls running
	maxInflight int             // most slow calls running at once
}

// serverStats is the answer of the stats tool.
type serverStats struct {
	Echoes      int `json:"echoes"`       // echo calls
	Texts       int `json:"texts"`        // distinct texts echoed
	MaxInflight int `json:"max_inflight"` // most slow calls running at once
}

type addIn struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type slowIn struct {
	MS int `json:"ms" jsonschema:"how long to take, in milliseconds"`
}

type none struct{}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// newTestServer returns the test MCP server. Its tools are, in order: add,
// echo, fail, slow, pid, stats, mixed, structured, env and crash; add is
// annotated idempotent, echo read-only, fail with a title alone, the others
// not at all. With
// MCPTOOL_TEST_BADNAME=1 in its environment it also offers "bad.name".
func newTestServer(st *serverState) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptool-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two integers.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(in.A + in.B)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			st.echoes++
			if st.texts == nil {
				st.texts = make(map[string]bool)
			}
			st.texts[in.Text] = true
			st.mu.Unlock()
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails.", Annotations: &mcp.ToolAnnotations{Title: "Fail"}},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("boom")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Waits, then answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			st.inflight++
			st.maxInflight = max(st.maxInflight, st.inflight)
			st.mu.Unlock()
			defer func() {
				st.mu.Lock()
				st.inflight--
				st.mu.Unlock()
			}()
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text("done"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the server's process ID."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stats", Description: "Returns the server's counters."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			b, err := json.Marshal(serverStats{Echoes: st.echoes, Texts: len(st.texts), MaxInflight: st.maxInflight})
			return text(string(b)), nil, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "mixed", Description: "Returns one block of each kind."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			size := int64(99)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "hello"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3, 4}},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
				&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Size: &size},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.txt", MIMEType: "text/plain", Text: "inline"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///c.bin", Blob: []byte{1, 2}}},
			}}, nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "structured", Description: "Returns structured content only.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"ok": true, "n": 1}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns $MCPTOOL_TEST_VALUE."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return text(os.Getenv("MCPTOOL_TEST_VALUE")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server with status 3."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing on purpose")
			os.Exit(3)
			return nil, nil, nil
		})
	if os.Getenv("MCPTOOL_TEST_BADNAME") == "1" {
		mcp.AddTool(s, &mcp.Tool{Name: "bad.name", Description: "Has a dot in its name."},
			func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
				return text("ok"), nil, nil
			})
	}
	return s
}
