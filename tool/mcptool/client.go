package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/batchagent/batchagent/tool"
)

// DefaultTimeout is the default [ServerConfig.Timeout].
const DefaultTimeout = 60 * time.Second

// DefaultConnectTimeout is the default [ServerConfig.ConnectTimeout].
const DefaultConnectTimeout = 60 * time.Second

// closeGrace is how long Close waits for a stdio server to exit after closing
// its stdin, and again after SIGTERM, before it kills the process.
const closeGrace = 5 * time.Second

// stderrTail is how many trailing bytes of a stdio server's standard error are
// kept for error messages.
const stderrTail = 512

// stderrSettle is how long the first error of an ended stdio session waits
// for the server's standard error, when it has written none yet.
const stderrSettle = 250 * time.Millisecond

// ErrSessionClosed is wrapped by the error of a call on a session that has
// ended: the server exited or dropped the session, or [Client.Close] was
// called. Such errors also wrap [tool.ErrFatal].
var ErrSessionClosed = errors.New("mcptool: session closed")

// ErrBadConfig is wrapped by the error [Connect] returns for an invalid
// [ServerConfig], or for an allowlist that does not fit the server's tools.
var ErrBadConfig = errors.New("mcptool: bad config")

// ServerConfig says how to reach one MCP server and which of its tools to
// expose. Exactly one of Command and URL must be set.
type ServerConfig struct {
	// Name labels the server in errors. Required.
	Name string
	// Command is the program to run and its arguments, for a server that
	// speaks MCP over its stdin and stdout. The program is looked up in PATH
	// when it contains no slash. The last 512 bytes of its standard error
	// are kept for error messages and not shown otherwise.
	Command []string
	// Env is extra environment for Command, as "KEY=value" entries added to
	// this process's environment. Zero means the environment is inherited
	// unchanged; it must be empty when URL is set.
	Env []string
	// URL is the endpoint of a server that speaks the streamable HTTP
	// transport (http or https).
	URL string
	// Tools lists the names of the tools to expose, in that order; each must
	// be offered by the server. Zero means every tool the server offers, in
	// its order.
	Tools []string
	// Cacheable marks the exposed tools cacheable ([tool.Spec.Cacheable]):
	// set it only when their results depend on nothing but their arguments.
	// It also vouches that they are idempotent, whatever their annotations
	// say (see Side effects in the package doc).
	Cacheable bool
	// Timeout bounds each call. Defaults to DefaultTimeout; negative is an
	// error.
	Timeout time.Duration
	// ConnectTimeout bounds Connect: starting the program, the handshake and
	// listing the tools (a first start through a package runner may
	// download the server). Defaults to DefaultConnectTimeout; negative is
	// an error.
	ConnectTimeout time.Duration
	// HTTPClient sends the requests to URL. Nil means a client of this
	// package with dial and TLS handshake timeouts and no overall timeout
	// (calls are bounded by Timeout); it must be nil when Command is set.
	HTTPClient *http.Client
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	return c
}

// validate reports every problem of c, each wrapping ErrBadConfig.
func (c ServerConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("mcptool: server %q: "+format+": %w", append(append([]any{c.Name}, args...), ErrBadConfig)...))
	}
	if c.Name == "" {
		bad("Name is empty")
	}
	switch {
	case len(c.Command) == 0 && c.URL == "":
		bad("neither Command nor URL is set")
	case len(c.Command) > 0 && c.URL != "":
		bad("both Command and URL are set")
	case len(c.Command) > 0:
		if c.Command[0] == "" {
			bad("Command[0] is empty")
		}
		if c.HTTPClient != nil {
			bad("HTTPClient is set for a Command server")
		}
	default:
		if u, err := url.Parse(c.URL); err != nil {
			bad("URL: %v", err)
		} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("URL %q: want an http or https URL with a host", c.URL)
		}
		if len(c.Env) > 0 {
			bad("Env is set for a URL server")
		}
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			bad("Env entry %q: want KEY=value", kv)
		}
	}
	seen := make(map[string]bool, len(c.Tools))
	for _, name := range c.Tools {
		switch {
		case !validName(name):
			bad("Tools entry %q: want a name matching [a-zA-Z0-9_-]{1,64}", name)
		case seen[name]:
			bad("Tools lists %q twice", name)
		}
		seen[name] = true
	}
	if c.Timeout < 0 {
		bad("negative Timeout %v", c.Timeout)
	}
	if c.ConnectTimeout < 0 {
		bad("negative ConnectTimeout %v", c.ConnectTimeout)
	}
	return errors.Join(errs...)
}

// Client is one MCP session, shared by every agent of a job. Its tools
// ([Client.Tools]) send their calls over the session. A Client is safe for
// concurrent use. The zero value is not usable: create a Client with
// [Connect] and end it with [Client.Close].
type Client struct {
	cfg            ServerConfig // with defaults applied
	session        *mcp.ClientSession
	tools          []tool.Tool     // immutable after Connect
	stderr         *tailWriter     // a stdio server's standard error; nil for HTTP
	stderrSettled  sync.Once       // sessionError has waited for stderr
	ownHTTP        *http.Transport // the transport of the default HTTP client; nil otherwise
	timeout        error           // the cause of a call that runs past cfg.Timeout
	connectTimeout error           // the cause of a Connect that runs past cfg.ConnectTimeout
	ended          chan struct{}   // closed once the session has ended

	closeOnce sync.Once // runs Close's work once
	closeErr  error     // Close's result; written inside closeOnce

	mu       sync.Mutex // protects closed, nextID and inflight
	closed   bool       // Close has started: calls fail at once
	nextID   uint64
	inflight map[uint64]context.CancelCauseFunc // cancels the calls in flight
}

// Connect starts the server program (Command) or reaches the server (URL),
// initialises an MCP session and lists the server's tools, all pages, within
// cfg.ConnectTimeout and while ctx lasts. The session itself outlives ctx and
// lasts until [Client.Close].
//
// Connect returns an error wrapping [ErrBadConfig] if cfg is invalid (every
// problem is listed), if Tools names a tool the server does not offer, or if
// an exposed tool's name is not a valid [tool.Spec] name. It returns an error
// wrapping [tool.ErrTimeout] if the server does not answer in time. Errors
// for a stdio server end with the tail of its standard error. On error,
// nothing is left running.
func Connect(ctx context.Context, cfg ServerConfig) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("mcptool: server %q: connect: %w", cfg.Name, context.Cause(ctx))
	}
	c := &Client{
		cfg:            cfg,
		timeout:        fmt.Errorf("%w after %v", tool.ErrTimeout, cfg.Timeout),
		connectTimeout: fmt.Errorf("%w after %v", tool.ErrTimeout, cfg.ConnectTimeout),
		ended:          make(chan struct{}),
		inflight:       make(map[uint64]context.CancelCauseFunc),
	}
	var transport mcp.Transport
	if len(cfg.Command) > 0 {
		cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
		if len(cfg.Env) > 0 {
			cmd.Env = append(os.Environ(), cfg.Env...)
		}
		c.stderr = newTailWriter(stderrTail)
		cmd.Stderr = c.stderr
		cmd.WaitDelay = closeGrace // a child holding stderr open cannot block Wait
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: closeGrace}
	} else {
		hc := cfg.HTTPClient
		if hc == nil {
			c.ownHTTP = newHTTPTransport()
			hc = &http.Client{Transport: c.ownHTTP}
		}
		// Without the standalone SSE stream the session holds no request
		// open between calls: tool calls need no server-initiated messages.
		transport = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc, DisableStandaloneSSE: true}
	}

	hctx, cancel := context.WithTimeoutCause(ctx, cfg.ConnectTimeout, c.connectTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "batchagent", Version: "1"}, nil)
	session, err := client.Connect(hctx, transport, nil)
	if err != nil { // the SDK has closed what it started
		c.closeIdle()
		return nil, c.connectError("connect", ctx, hctx, err)
	}
	c.session = session
	if c.tools, err = c.listTools(ctx, hctx); err != nil {
		err = errors.Join(err, c.closeSession())
		c.closeIdle()
		return nil, err
	}
	go func() { // Close waits for it: it ends when the session does
		_ = session.Wait() // the reason, if any, comes back from Close
		close(c.ended)
	}()
	return c, nil
}

// listTools lists the server's tools and wraps the exposed ones.
func (c *Client) listTools(ctx, hctx context.Context) ([]tool.Tool, error) {
	var offered []*mcp.Tool
	byName := make(map[string]*mcp.Tool)
	for t, err := range c.session.Tools(hctx, nil) {
		if err != nil {
			return nil, c.connectError("list tools", ctx, hctx, err)
		}
		offered = append(offered, t)
		byName[t.Name] = t
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("mcptool: server %q: "+format+": %w", append(append([]any{c.cfg.Name}, args...), ErrBadConfig)...)
	}
	chosen := offered
	if len(c.cfg.Tools) > 0 {
		chosen = make([]*mcp.Tool, 0, len(c.cfg.Tools))
		var missing []string
		for _, name := range c.cfg.Tools {
			if t, ok := byName[name]; ok {
				chosen = append(chosen, t)
			} else {
				missing = append(missing, fmt.Sprintf("%q", name))
			}
		}
		if len(missing) > 0 {
			names := make([]string, len(offered))
			for i, t := range offered {
				names[i] = t.Name
			}
			return nil, bad("Tools names %s, which the server does not offer (it offers: %s)",
				strings.Join(missing, ", "), strings.Join(names, ", "))
		}
	}
	var errs []error
	tools := make([]tool.Tool, 0, len(chosen))
	for _, t := range chosen {
		if !validName(t.Name) {
			errs = append(errs, bad("tool %q: the name does not match [a-zA-Z0-9_-]{1,64}; list the tools to expose in Tools", t.Name))
			continue
		}
		params, err := inputSchema(t)
		if err != nil {
			errs = append(errs, bad("tool %q: %v", t.Name, err))
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if desc == "" && t.Annotations != nil {
			desc = t.Annotations.Title
		}
		tools = append(tools, &mcpTool{c: c, spec: tool.Spec{
			Name:          t.Name,
			Description:   desc,
			Parameters:    params,
			Cacheable:     c.cfg.Cacheable,
			NotIdempotent: !c.cfg.Cacheable && !idempotent(t.Annotations),
		}})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tools, nil
}

// idempotent reports whether a tool's annotations declare it read-only or
// idempotent. The annotations are the server's hints; absent, MCP says to
// assume a tool is neither.
func idempotent(a *mcp.ToolAnnotations) bool {
	return a != nil && (a.ReadOnlyHint || a.IdempotentHint)
}

// inputSchema returns t's input schema as a JSON object.
func inputSchema(t *mcp.Tool) (json.RawMessage, error) {
	if t.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("input schema %.40s is not a JSON object", b)
	}
	return b, nil
}

// connectError describes a failure of Connect's step op. hctx is ctx
// bounded by cfg.ConnectTimeout.
func (c *Client) connectError(op string, ctx, hctx context.Context, err error) error {
	if ctx.Err() == nil && context.Cause(hctx) == c.connectTimeout {
		err = c.connectTimeout
	} else if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	return fmt.Errorf("mcptool: server %q: %s: %w%s", c.cfg.Name, op, err, c.stderrNote())
}

// stderrNote returns " (stderr: ...)" with the tail of a stdio server's
// standard error, or "" when there is none.
func (c *Client) stderrNote() string {
	if c.stderr == nil {
		return ""
	}
	if s := c.stderr.String(); s != "" {
		return fmt.Sprintf(" (stderr: %q)", s)
	}
	return ""
}

// Tools returns the exposed tools, in the order of [ServerConfig.Tools] or
// else the server's. Each call returns a new slice of the same tools. The
// tools are safe for concurrent use; their calls share the Client's session
// and fail with an error wrapping [ErrSessionClosed] once it has ended.
func (c *Client) Tools() []tool.Tool {
	return append([]tool.Tool(nil), c.tools...)
}

// Close ends the session: it cancels the calls in flight (they fail with
// [ErrSessionClosed]) and closes the connection. For a stdio server it
// closes the program's stdin and waits for it to exit, sending SIGTERM after
// a grace period of 5s and killing it after another. For an HTTP server it
// asks the server to end the session. Close is idempotent and safe to call
// concurrently with calls; every call of Close returns the same error: the
// program's exit status if it exited with an error or was killed, or the
// failure of the HTTP request that ends the session.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		for _, cancel := range c.inflight {
			cancel(ErrSessionClosed)
		}
		c.mu.Unlock()
		c.closeErr = c.closeSession()
		<-c.ended
		c.closeIdle()
	})
	return c.closeErr
}

// closeSession closes the session and describes its failure.
func (c *Client) closeSession() error {
	if err := c.session.Close(); err != nil {
		return fmt.Errorf("mcptool: server %q: close: %w%s", c.cfg.Name, err, c.stderrNote())
	}
	return nil
}

// closeIdle closes the idle connections of the default HTTP client.
func (c *Client) closeIdle() {
	if c.ownHTTP != nil {
		c.ownHTTP.CloseIdleConnections()
	}
}

// call sends one tools/call request.
func (c *Client) call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", c.sessionError(nil)
	}
	id := c.nextID
	c.nextID++
	c.inflight[id] = cancel
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
	}()
	select {
	case <-c.ended:
		return "", c.sessionError(nil)
	default:
	}

	callCtx, stop := context.WithTimeoutCause(callCtx, c.cfg.Timeout, c.timeout)
	defer stop()
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res, err := c.session.CallTool(callCtx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", c.callError(ctx, callCtx, err)
	}
	if res == nil {
		return "", fmt.Errorf("mcp server %q: empty tools/call result", c.cfg.Name)
	}
	text := resultText(res)
	if res.IsError {
		return "", &ToolError{Server: c.cfg.Name, Tool: name, Text: text}
	}
	return text, nil
}

// callError describes a failed tools/call request. ctx is the caller's
// context and callCtx the request's.
func (c *Client) callError(ctx, callCtx context.Context, err error) error {
	cause := context.Cause(callCtx)
	switch {
	case errors.Is(cause, ErrSessionClosed): // Close cancelled the call
		return c.sessionError(nil)
	case ctx.Err() != nil: // the caller gave up
		return context.Cause(ctx)
	case cause == c.timeout:
		return c.timeout
	}
	ended := false
	select {
	case <-c.ended:
		ended = true
	default:
	}
	if ended || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return c.sessionError(err)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeInvalidParams {
		return fmt.Errorf("%w: %s", tool.ErrBadArguments, rpcErr.Message)
	}
	return fmt.Errorf("mcp server %q: %w", c.cfg.Name, err)
}

// sessionError returns the error of a call on an ended session; cause, if
// not nil, is what the SDK reported. A stdio server that exited on its own
// wrote its last words to standard error, which os/exec copies in its own
// goroutine: the first such error waits up to stderrSettle for them. Once
// Close has started, the session ends because of it and the error waits for
// nothing.
func (c *Client) sessionError(cause error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if c.stderr != nil && !closed {
		c.stderrSettled.Do(func() {
			t := time.NewTimer(stderrSettle)
			defer t.Stop()
			select {
			case <-c.stderr.wrote:
			case <-t.C:
			}
		})
	}
	return &sessionError{server: c.cfg.Name, cause: cause, stderr: c.stderrNote()}
}

// sessionError is the error of a call on a session that has ended. It
// matches ErrSessionClosed and tool.ErrFatal.
type sessionError struct {
	server string
	cause  error  // may be nil
	stderr string // from stderrNote
}

func (e *sessionError) Error() string {
	msg := fmt.Sprintf("mcptool: server %q: session closed", e.server)
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg + e.stderr
}

func (e *sessionError) Is(target error) bool {
	return target == ErrSessionClosed || target == tool.ErrFatal
}

func (e *sessionError) Unwrap() error { return e.cause }

// ToolError is the error of a call whose result the server marked as an
// error: the tool ran and failed, and the model should see why. The agent
// sends Error's text back to the model as the tool's result.
type ToolError struct {
	// Server is the [ServerConfig.Name] of the server.
	Server string
	// Tool is the name of the tool that failed.
	Tool string
	// Text is the result's content, rendered as for a successful call.
	Text string
}

// Error returns the tool's message, or a placeholder if it sent none.
func (e *ToolError) Error() string {
	if e.Text == "" {
		return "the tool failed without a message"
	}
	return e.Text
}

// mcpTool is one exposed tool of a Client.
type mcpTool struct {
	c    *Client
	spec tool.Spec
}

func (t *mcpTool) Spec() tool.Spec {
	s := t.spec
	s.Parameters = append(json.RawMessage(nil), s.Parameters...)
	return s
}

func (t *mcpTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.c.call(ctx, t.spec.Name, args)
}

// newHTTPTransport returns the transport of the default HTTP client: dial
// and TLS handshake are bounded, responses are not (a call's context bounds
// them, and results may stream), and enough idle connections are kept for
// many agents calling at once.
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100,
		ForceAttemptHTTP2:     true,
	}
}

// tailWriter keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailWriter struct {
	max   int
	wrote chan struct{} // closed at the first write
	once  sync.Once     // closes wrote

	mu  sync.Mutex // protects buf
	buf []byte
}

func newTailWriter(max int) *tailWriter {
	return &tailWriter{max: max, wrote: make(chan struct{})}
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(p) > 0 {
		w.once.Do(func() { close(w.wrote) })
	}
	n := len(p)
	if len(p) > w.max {
		p = p[len(p)-w.max:]
	}
	if over := len(w.buf) + len(p) - w.max; over > 0 {
		w.buf = w.buf[:copy(w.buf, w.buf[over:])]
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// String returns the kept bytes without surrounding space.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}

// validName reports whether name matches [a-zA-Z0-9_-]{1,64}, the names a
// [tool.Pool] accepts.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
