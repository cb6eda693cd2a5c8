package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/mcptool"
)

// stdioConfig returns the config of the test server run as a child process:
// this test binary, run again with serverEnv set to mode. (GORACE keeps a
// child built with -race from sleeping a second as it exits.)
func stdioConfig(mode string, env ...string) mcptool.ServerConfig {
	return mcptool.ServerConfig{
		Name:    "test",
		Command: []string{os.Args[0]},
		Env:     append([]string{serverEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}, env...),
	}
}

// connect connects to the server of cfg and closes the client when the test
// ends.
func connect(t *testing.T, cfg mcptool.ServerConfig) *mcptool.Client {
	t.Helper()
	c, err := mcptool.Connect(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Connect(%+v) = %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return c
}

// byName returns c's tool called name.
func byName(t *testing.T, c *mcptool.Client, name string) tool.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

func call(t *testing.T, tl tool.Tool, args string) (string, error) {
	t.Helper()
	return tl.Call(t.Context(), json.RawMessage(args))
}

// stats calls the server's stats tool.
func stats(t *testing.T, c *mcptool.Client) serverStats {
	t.Helper()
	out, err := call(t, byName(t, c, "stats"), `{}`)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var s serverStats
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("stats %q: %v", out, err)
	}
	return s
}

// spec is a tool.Spec with its parameters decoded, for comparison.
type spec struct {
	Name, Description string
	Parameters        map[string]any
	Cacheable         bool
}

func specOf(t *testing.T, tl tool.Tool) spec {
	t.Helper()
	s := tl.Spec()
	out := spec{Name: s.Name, Description: s.Description, Cacheable: s.Cacheable}
	if err := json.Unmarshal(s.Parameters, &out.Parameters); err != nil {
		t.Fatalf("%s: Parameters %s: %v", s.Name, s.Parameters, err)
	}
	return out
}

func integer(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}

func TestToolsStdio(t *testing.T) {
	c := connect(t, stdioConfig("1"))
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Spec().Name)
	}
	want := []string{"add", "crash", "echo", "env", "fail", "mixed", "pid", "slow", "stats", "structured"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Tools() names (-want +got):\n%s", diff)
	}
	wantAdd := spec{
		Name:        "add",
		Description: "Adds two integers.",
		Parameters: map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"properties":           map[string]any{"a": integer("the first addend"), "b": integer("the second addend")},
			"required":             []any{"a", "b"},
		},
	}
	if diff := cmp.Diff(wantAdd, specOf(t, byName(t, c, "add"))); diff != "" {
		t.Errorf("Spec() of add (-want +got):\n%s", diff)
	}
	wantStructured := spec{Name: "structured", Description: "Returns structured content only.", Parameters: map[string]any{"type": "object"}}
	if diff := cmp.Diff(wantStructured, specOf(t, byName(t, c, "structured"))); diff != "" {
		t.Errorf("Spec() of structured (-want +got):\n%s", diff)
	}
}

func TestCall(t *testing.T) {
	c := connect(t, stdioConfig("1", "MCPTOOL_TEST_VALUE=from env"))
	tests := []struct {
		name, tool, args string
		want             string
		wantToolErr      string // the text of a *ToolError
	}{
		{name: "add", tool: "add", args: `{"a":2,"b":3}`, want: "5"},
		{name: "echo", tool: "echo", args: `{"text":"hello there"}`, want: "hello there"},
		{name: "env", tool: "env", args: `{}`, want: "from env"},
		{name: "structured content as JSON", tool: "structured", args: `{}`, want: `{"n":1,"ok":true}`},
		{name: "mixed content", tool: "mixed", args: `{}`, want: strings.Join([]string{
			"hello",
			"[image/png, 4 bytes]",
			"[audio/wav, 10 bytes]",
			`[resource link file:///a.txt "a.txt", text/plain, 99 bytes]`,
			"inline",
			"[resource file:///c.bin, binary, 2 bytes]",
		}, "\n")},
		{name: "empty arguments", tool: "pid", args: ``, want: ""},
		{name: "isError", tool: "fail", args: `{}`, wantToolErr: "boom"},
		{name: "arguments off the schema", tool: "add", args: `{"a":"x","b":1}`,
			wantToolErr: `validating "arguments": validating root: validating /properties/a: type: x has type "string", want "integer"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := call(t, byName(t, c, tt.tool), tt.args)
			if tt.wantToolErr != "" {
				var te *mcptool.ToolError
				if !errors.As(err, &te) {
					t.Fatalf("Call(%s) = %q, %v, want a *ToolError", tt.args, got, err)
				}
				want := &mcptool.ToolError{Server: "test", Tool: tt.tool, Text: tt.wantToolErr}
				if diff := cmp.Diff(want, te); diff != "" {
					t.Errorf("Call(%s) error (-want +got):\n%s", tt.args, diff)
				}
				if err.Error() != tt.wantToolErr {
					t.Errorf("Call(%s) error text = %q, want %q", tt.args, err.Error(), tt.wantToolErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call(%s) = %v", tt.args, err)
			}
			if tt.tool == "pid" { // any process ID will do
				if got == "" {
					t.Errorf("Call(%s) = %q, want a process ID", tt.args, got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Call(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestNotIdempotentFromAnnotations: a tool the server does not declare
// read-only or idempotent is NotIdempotent, annotations absent or not;
// Cacheable vouches for every tool.
func TestNotIdempotentFromAnnotations(t *testing.T) {
	for _, cacheable := range []bool{false, true} {
		cfg := stdioConfig("1")
		cfg.Tools = []string{"add", "echo", "fail", "slow"}
		cfg.Cacheable = cacheable
		c := connect(t, cfg)
		got := map[string]bool{}
		for _, tl := range c.Tools() {
			got[tl.Spec().Name] = tl.Spec().NotIdempotent
		}
		want := map[string]bool{"add": false, "echo": false, "fail": !cacheable, "slow": !cacheable}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Cacheable %v: NotIdempotent by tool (-want +got):\n%s", cacheable, diff)
		}
		p, err := tool.NewPool(c.Tools(), tool.PoolConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for name, not := range want {
			if got := p.Idempotent(name); got == not {
				t.Errorf("Cacheable %v: Pool.Idempotent(%q) = %v, want %v", cacheable, name, got, !not)
			}
		}
	}
}

func TestAllowlist(t *testing.T) {
	cfg := stdioConfig("1")
	cfg.Tools = []string{"echo", "add"}
	cfg.Cacheable = true
	c := connect(t, cfg)
	var got []string
	for _, tl := range c.Tools() {
		s := tl.Spec()
		got = append(got, fmt.Sprintf("%s cacheable=%v", s.Name, s.Cacheable))
	}
	want := []string{"echo cacheable=true", "add cacheable=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tools() with Tools %q (-want +got):\n%s", cfg.Tools, diff)
	}
	if out, err := call(t, c.Tools()[1], `{"a":40,"b":2}`); out != "42" || err != nil {
		t.Errorf("add(40, 2) = %q, %v, want \"42\", nil", out, err)
	}
}

func TestConcurrentCallsShareOneSession(t *testing.T) {
	c := connect(t, stdioConfig("1"))
	pid, slow := byName(t, c, "pid"), byName(t, c, "slow")
	const n = 50
	pids := make([]string, n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { pids[i], errs[i] = call(t, pid, `{}`) })
		wg.Go(func() { _, errs[n+i] = call(t, slow, `{"ms":100}`) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("calls failed: %v", err)
	}
	for i, p := range pids {
		if p != pids[0] {
			t.Fatalf("call %d: pid = %s, want %s: every call must reach the one server process", i, p, pids[0])
		}
	}
	if pids[0] == fmt.Sprint(os.Getpid()) {
		t.Errorf("pid = %s, the test's own: want the child process", pids[0])
	}
	// The 100ms calls overlap, so the server runs several at once: the
	// session multiplexes them instead of serialising them.
	if m := stats(t, c).MaxInflight; m < 2 {
		t.Errorf("most slow calls running at once = %d, want at least 2", m)
	}
}

func TestTimeout(t *testing.T) {
	cfg := stdioConfig("1")
	cfg.Timeout = 250 * time.Millisecond
	c := connect(t, cfg)
	_, err := call(t, byName(t, c, "slow"), `{"ms":60000}`)
	if !errors.Is(err, tool.ErrTimeout) || errors.Is(err, mcptool.ErrSessionClosed) {
		t.Fatalf("slow call with Timeout 250ms = %v, want an error wrapping tool.ErrTimeout only", err)
	}
	// The session survives a timed-out call.
	if out, err := call(t, byName(t, c, "echo"), `{"text":"still here"}`); out != "still here" || err != nil {
		t.Errorf("echo after a timeout = %q, %v, want \"still here\", nil", out, err)
	}
}

func TestCallerCancels(t *testing.T) {
	c := connect(t, stdioConfig("1"))
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	cause := errors.New("caller left")
	done := make(chan error, 1) // the slow call's result
	go func() {
		_, err := byName(t, c, "slow").Call(ctx, json.RawMessage(`{"ms":60000}`))
		done <- err
	}()
	waitRunning(t, c)
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("Call with a cancelled context = %v, want the context's cause", err)
	}
	if out, err := call(t, byName(t, c, "echo"), `{"text":"ok"}`); out != "ok" || err != nil {
		t.Errorf("echo after a cancelled call = %q, %v, want \"ok\", nil", out, err)
	}
}

// waitRunning returns once the server has started a slow call.
func waitRunning(t *testing.T, c *mcptool.Client) {
	t.Helper()
	for {
		if stats(t, c).MaxInflight > 0 {
			return
		}
	}
}

func TestCloseEndsCalls(t *testing.T) {
	c, err := mcptool.Connect(t.Context(), stdioConfig("1"))
	if err != nil {
		t.Fatal(err)
	}
	slow, echo := byName(t, c, "slow"), byName(t, c, "echo")
	done := make(chan error, 1) // the slow call's result
	go func() {
		_, err := call(t, slow, `{"ms":60000}`)
		done <- err
	}()
	waitRunning(t, c)
	if err := c.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	if err := <-done; !errors.Is(err, mcptool.ErrSessionClosed) || !errors.Is(err, tool.ErrFatal) {
		t.Errorf("call in flight during Close = %v, want an error wrapping ErrSessionClosed and tool.ErrFatal", err)
	}
	if _, err := call(t, echo, `{"text":"x"}`); !errors.Is(err, mcptool.ErrSessionClosed) || !errors.Is(err, tool.ErrFatal) {
		t.Errorf("call after Close = %v, want an error wrapping ErrSessionClosed and tool.ErrFatal", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

func TestServerCrash(t *testing.T) {
	c, err := mcptool.Connect(t.Context(), stdioConfig("1"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tl := range []tool.Tool{byName(t, c, "crash"), byName(t, c, "echo")} {
		_, err := call(t, tl, `{}`)
		if !errors.Is(err, mcptool.ErrSessionClosed) || !errors.Is(err, tool.ErrFatal) {
			t.Errorf("call %d = %v, want an error wrapping ErrSessionClosed and tool.ErrFatal", i, err)
		}
		if err != nil && !strings.Contains(err.Error(), "crashing on purpose") {
			t.Errorf("call %d = %v, want the server's stderr in the message", i, err)
		}
	}
	err = c.Close()
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Close() after a crash = %v, want the exit status", err)
	}
}

func TestConnectErrors(t *testing.T) {
	withTools := func(cfg mcptool.ServerConfig, tools ...string) mcptool.ServerConfig {
		cfg.Tools = tools
		return cfg
	}
	withConnectTimeout := func(cfg mcptool.ServerConfig, d time.Duration) mcptool.ServerConfig {
		cfg.ConnectTimeout = d
		return cfg
	}
	tests := []struct {
		name    string
		cfg     mcptool.ServerConfig
		wantIs  error    // nil: any error
		wantMsg []string // substrings of the message
	}{
		{name: "zero config", cfg: mcptool.ServerConfig{}, wantIs: mcptool.ErrBadConfig,
			wantMsg: []string{"Name is empty", "neither Command nor URL"}},
		{name: "both transports", cfg: mcptool.ServerConfig{Name: "x", Command: []string{"a"}, URL: "http://h/"},
			wantIs: mcptool.ErrBadConfig, wantMsg: []string{"both Command and URL"}},
		{name: "bad URL", cfg: mcptool.ServerConfig{Name: "x", URL: "ftp://h/", Env: []string{"A=1"}},
			wantIs: mcptool.ErrBadConfig, wantMsg: []string{`URL "ftp://h/"`, "Env is set for a URL server"}},
		{name: "bad command fields", cfg: mcptool.ServerConfig{Name: "x", Command: []string{""}, Env: []string{"NOEQUALS"},
			HTTPClient: http.DefaultClient, Timeout: -1, ConnectTimeout: -1, Tools: []string{"a", "a", "b.c"}},
			wantIs: mcptool.ErrBadConfig, wantMsg: []string{"Command[0] is empty", `Env entry "NOEQUALS"`,
				"HTTPClient is set", "negative Timeout", "negative ConnectTimeout", `Tools lists "a" twice`, `Tools entry "b.c"`}},
		{name: "missing program", cfg: mcptool.ServerConfig{Name: "x", Command: []string{"/nonexistent/mcp-server"}},
			wantMsg: []string{`server "x": connect:`, "no such file"}},
		{name: "program exits", cfg: stdioConfig("exit"), wantMsg: []string{`stderr: "no server here"`}},
		{name: "server never answers", cfg: withConnectTimeout(stdioConfig("hang"), 200*time.Millisecond),
			wantIs: tool.ErrTimeout, wantMsg: []string{"timed out after 200ms"}},
		{name: "allowlist names a missing tool", cfg: withTools(stdioConfig("1"), "echo", "nope", "gone"),
			wantIs: mcptool.ErrBadConfig, wantMsg: []string{`Tools names "nope", "gone"`, "it offers: add, crash"}},
		{name: "server tool name unusable", cfg: stdioConfig("1", "MCPTOOL_TEST_BADNAME=1"),
			wantIs: mcptool.ErrBadConfig, wantMsg: []string{`tool "bad.name": the name does not match`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := mcptool.Connect(t.Context(), tt.cfg)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Connect(%+v) = nil error, want one", tt.cfg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Connect() = %v, want an error wrapping %v", err, tt.wantIs)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Connect() = %v, want it to mention %q", err, s)
				}
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := mcptool.Connect(ctx, stdioConfig("1")); !errors.Is(err, context.Canceled) {
			t.Errorf("Connect(cancelled ctx) = %v, want context.Canceled", err)
		}
	})
}

// httpServer serves a test server over the streamable HTTP transport and
// closes its sessions when the test ends.
func httpServer(t *testing.T) (*httptest.Server, *mcp.Server) {
	t.Helper()
	var st serverState
	srv := newTestServer(&st)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		hs.Close()
		for ss := range srv.Sessions() { // those whose client went away without ending them
			_ = ss.Close()
		}
	})
	return hs, srv
}

func TestHTTP(t *testing.T) {
	hs, srv := httpServer(t)
	c := connect(t, mcptool.ServerConfig{Name: "http", URL: hs.URL, Tools: []string{"echo", "add", "stats"}})
	if diff := cmp.Diff(spec{
		Name:        "echo",
		Description: "Returns its text.",
		Parameters: map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"properties":           map[string]any{"text": map[string]any{"type": "string", "description": "the text to echo"}},
			"required":             []any{"text"},
		},
	}, specOf(t, c.Tools()[0])); diff != "" {
		t.Errorf("Spec() of echo (-want +got):\n%s", diff)
	}
	const n = 50
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = call(t, c.Tools()[0], fmt.Sprintf(`{"text":"hello%d"}`, i)) })
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprintf("hello%d", i); outs[i] != want || errs[i] != nil {
			t.Errorf("echo %d = %q, %v, want %q, nil", i, outs[i], errs[i], want)
		}
	}
	if got, want := stats(t, c), (serverStats{Echoes: n, Texts: n}); got != want {
		t.Errorf("server stats = %+v, want %+v", got, want)
	}
	sessions := 0
	for range srv.Sessions() {
		sessions++
	}
	if sessions != 1 {
		t.Errorf("server has %d sessions, want 1", sessions)
	}
	if _, err := call(t, c.Tools()[1], `{"a":1}`); err == nil {
		t.Errorf("add with a missing argument = nil error, want a tool error")
	}
}

func TestHTTPServerGone(t *testing.T) {
	hs, _ := httpServer(t)
	c, err := mcptool.Connect(t.Context(), mcptool.ServerConfig{Name: "http", URL: hs.URL, Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	hs.Close()
	if out, err := call(t, c.Tools()[0], `{"text":"x"}`); err == nil {
		t.Errorf("echo after the server closed = %q, nil, want an error", out)
	}
	if err := c.Close(); err == nil {
		t.Errorf("Close() after the server closed = nil, want the failed DELETE")
	}
}

func TestHTTPSessionEnded(t *testing.T) {
	hs, srv := httpServer(t)
	c := connect(t, mcptool.ServerConfig{Name: "http", URL: hs.URL, Tools: []string{"echo"}})
	if out, err := call(t, c.Tools()[0], `{"text":"x"}`); out != "x" || err != nil {
		t.Fatalf("echo = %q, %v, want \"x\", nil", out, err)
	}
	for ss := range srv.Sessions() { // the server ends the session: it answers 404 from now on
		if err := ss.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := call(t, c.Tools()[0], `{"text":"x"}`); !errors.Is(err, mcptool.ErrSessionClosed) || !errors.Is(err, tool.ErrFatal) {
			t.Errorf("call %d after the server ended the session = %v, want an error wrapping ErrSessionClosed and tool.ErrFatal", i, err)
		}
	}
}
