package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/oaiwire"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server/batchapi"
)

// Defaults of [Config].
const (
	DefaultMaxBodyBytes            = 8 << 20
	DefaultRequestTimeout          = 10 * time.Minute
	DefaultReadyTimeout            = 2 * time.Second
	DefaultHeaderTimeout           = 10 * time.Second
	DefaultBodyTimeout             = time.Minute
	DefaultUploadTimeout           = 10 * time.Minute
	DefaultIdleTimeout             = time.Minute
	DefaultMaxConnections          = 1024
	DefaultMaxConnectionsPerClient = 256
)

// AgentPrefix starts the model name of agent mode: "agent:NAME".
const AgentPrefix = "agent:"

// Recorder receives the gateway's measurements, for metrics. Its methods
// are called from many goroutines at once.
type Recorder interface {
	// Call is called once per chat completion that reached a backend or
	// an agent, as it ends: the model asked for, the time to its first
	// chunk (zero if none came), its whole time, its usage and its error
	// (nil on success).
	Call(model string, ttft, total time.Duration, usage llm.Usage, err error)
	// Result is called with the result of each agent-mode run.
	Result(agent string, r batchagent.Result)
}

// Tracer begins the span of one chat completion. Its method is called
// from many goroutines at once.
type Tracer interface {
	// Request begins the span of a request for model with input (the last
	// user message) and returns the context for what happens inside it
	// and a function called once at its end with the assistant's content,
	// the usage and the error.
	Request(ctx context.Context, model, input string) (context.Context, func(output string, usage llm.Usage, err error))
}

// Price is what a model's tokens cost, per million tokens: [llm.Price].
type Price = llm.Price

// Config configures a [Server].
type Config struct {
	// Engine runs the model calls and the agents. Required.
	Engine *batchagent.Engine
	// Backends maps the model names clients ask for to backends: a
	// request for one is a passthrough. Defaults to none.
	Backends map[string]batchagent.Backend
	// Agents maps agent names to specs: a request for model "agent:NAME"
	// runs that agent. Each spec's priority applies as set: make it
	// batchagent.Interactive to overtake batch work. Defaults to none.
	Agents map[string]*batchagent.Spec
	// Keys are the API keys accepted. Defaults to none: no
	// authentication.
	Keys []Key
	// MaxBodyBytes caps a request body; a larger one is answered 413.
	// Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequestTimeout bounds each chat completion; one that runs longer is
	// stopped and answered 504 (or its stream ended with an error event).
	// Defaults to DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ReadyTimeout bounds the backend probes of GET /ready. Defaults to
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// HeaderTimeout bounds the reading of a request's headers, from its
	// first byte. Defaults to DefaultHeaderTimeout (10s).
	HeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, from the end of
	// its headers: a body not in by then is answered 408 and its
	// connection closed. Defaults to DefaultBodyTimeout (1m).
	BodyTimeout time.Duration
	// UploadTimeout is BodyTimeout for the files uploaded to /v1/files,
	// which may be as large as BatchMaxBytes. Defaults to
	// DefaultUploadTimeout (10m).
	UploadTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request before it is closed. Defaults to DefaultIdleTimeout
	// (1m).
	IdleTimeout time.Duration
	// MaxConnections caps the connections open at once; one over it is
	// answered 503 with Retry-After and closed. Defaults to
	// DefaultMaxConnections (1024); negative means unlimited.
	MaxConnections int
	// MaxConnectionsPerClient caps the connections open at once from one
	// client address; one over it is answered 429 with Retry-After and
	// closed. Behind a proxy every connection comes from the proxy's
	// address: raise it, or make it negative (unlimited). Defaults to
	// DefaultMaxConnectionsPerClient (256).
	MaxConnectionsPerClient int
	// Prices maps model names (a backend's, or "agent:NAME") to what
	// their tokens cost: the usage of their answers then carries "cost".
	// Defaults to none: no cost.
	Prices map[string]Price
	// Logger receives a Debug line per request (route, model, status,
	// duration, key name) and Warn lines for failures. Keys and prompt
	// text are never logged. Defaults to none: silent.
	Logger *slog.Logger
	// Recorder, if set, receives measurements for metrics. Defaults to
	// none.
	Recorder Recorder
	// Tracer, if set, begins a span per chat completion. Defaults to none.
	Tracer Tracer
	// Observer, if set, also watches every agent run (for tracing), teed
	// with the gateway's progress events. Defaults to none.
	Observer agent.Observer
	// Metrics, if set, is served at GET /metrics, without authentication
	// (scrapers rarely carry keys: bind the server to a private address,
	// or front it). Defaults to none: /metrics is 404.
	Metrics http.Handler
	// Instrument, if set, wraps the handling of each route (its path:
	// "/health", "/ready", "/v1/models", "/v1/chat/completions",
	// "/v1/responses", "/v1/embeddings", "/v1/completions", "/metrics",
	// "/v1/files", "/v1/batches", or "other" for unknown
	// paths), once per route: for request metrics. Defaults to none.
	Instrument func(route string, h http.Handler) http.Handler

	// Batches, if set, stores the files and batches of the Batch API
	// (/v1/files, /v1/batches), served by a [batchapi.Server] whose lines
	// run as chat completions in the batch class; the server resumes the
	// store's unfinished batches when it starts. The caller closes it
	// after Shutdown. Defaults to none: those routes answer 404.
	Batches *batchapi.Store
	// BatchMaxLines caps the requests of a batch's input file. Defaults to
	// batchapi.DefaultMaxLines (50,000).
	BatchMaxLines int
	// BatchMaxBytes caps an uploaded file. Defaults to
	// batchapi.DefaultMaxBytes (200 MB).
	BatchMaxBytes int64
	// BatchConcurrency caps the batch lines in flight at once, all
	// batches together, and so the memory their requests hold; batches
	// running at once take turns for the places (the engine's admission
	// still bounds each backend). Defaults to batchapi.DefaultConcurrency.
	BatchConcurrency int
	// BatchWindow is how long a batch's completion window ("24h") lasts:
	// a batch not done by then ends expired. Tests shorten it. Defaults
	// to batchapi.DefaultWindow (24h).
	BatchWindow time.Duration
}

// Server is the OpenAI-compatible gateway: an http.Handler over an
// engine. It serves POST /v1/chat/completions, POST /v1/responses (mapped
// onto the same modes), POST /v1/embeddings and /v1/completions (forwarded
// to backends that are an [llm.Forwarder]), GET /v1/models and
// /v1/models/{model}, GET /health and GET /ready, and with [Config.Batches] the Batch API
// (/v1/files, /v1/batches). It is safe for concurrent use.
type Server struct {
	cfg     Config
	clients []*client
	models  []string       // sorted: backends, then agent:NAMEs
	mux     *http.ServeMux // the routes
	other   http.Handler   // unknown paths

	mu     sync.Mutex // protects the fields below
	active int        // chat completions in progress
	closed bool       // Shutdown was called
	idle   chan struct{}
	// running are the executors of the chat completions in progress, for
	// the drain to stop those not in flight.
	running map[*executor]struct{}
	hs      *http.Server

	batchAgents map[string]*batchagent.Spec // Agents, in the batch class
	batches     *batchapi.Server            // nil without Config.Batches
}

// New returns a Server for cfg. The error says what is wrong with cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil {
		return nil, errors.New("server: no engine")
	}
	if cfg.MaxBodyBytes < 0 || cfg.RequestTimeout < 0 || cfg.ReadyTimeout < 0 {
		return nil, fmt.Errorf("server: negative limit (max body %d, request timeout %v, ready timeout %v)", cfg.MaxBodyBytes, cfg.RequestTimeout, cfg.ReadyTimeout)
	}
	if cfg.HeaderTimeout < 0 || cfg.BodyTimeout < 0 || cfg.UploadTimeout < 0 || cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("server: negative timeout (header %v, body %v, upload %v, idle %v)", cfg.HeaderTimeout, cfg.BodyTimeout, cfg.UploadTimeout, cfg.IdleTimeout)
	}
	cfg.HeaderTimeout = cmp.Or(cfg.HeaderTimeout, DefaultHeaderTimeout)
	cfg.BodyTimeout = cmp.Or(cfg.BodyTimeout, DefaultBodyTimeout)
	cfg.UploadTimeout = cmp.Or(cfg.UploadTimeout, DefaultUploadTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxConnections = cmp.Or(cfg.MaxConnections, DefaultMaxConnections)
	cfg.MaxConnectionsPerClient = cmp.Or(cfg.MaxConnectionsPerClient, DefaultMaxConnectionsPerClient)
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BatchMaxLines < 0 || cfg.BatchMaxBytes < 0 || cfg.BatchConcurrency < 0 || cfg.BatchWindow < 0 {
		return nil, errors.New("server: negative batch limit")
	}
	s := &Server{cfg: cfg}
	for name, b := range cfg.Backends {
		if b.Model == nil {
			return nil, fmt.Errorf("server: backend %q has no model", name)
		}
		if strings.HasPrefix(name, AgentPrefix) || name == "" {
			return nil, fmt.Errorf("server: backend name %q is empty or starts with %q", name, AgentPrefix)
		}
		s.models = append(s.models, name)
	}
	var agents []string
	s.batchAgents = map[string]*batchagent.Spec{}
	for name, spec := range cfg.Agents {
		if spec == nil {
			return nil, fmt.Errorf("server: agent %q has no spec", name)
		}
		agents = append(agents, AgentPrefix+name)
		bs, err := batchSpec(spec)
		if err != nil {
			return nil, fmt.Errorf("server: agent %q: %w", name, err)
		}
		s.batchAgents[name] = bs
	}
	slices.Sort(s.models)
	slices.Sort(agents)
	s.models = append(s.models, agents...)
	clients, err := newClients(cfg.Keys)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.clients = clients
	if cfg.Batches != nil {
		// Last: it starts the runners of the unfinished batches.
		s.batches, err = batchapi.New(batchapi.Config{
			Store: cfg.Batches, Exec: s.execLine, Logger: cfg.Logger, MaxBodyBytes: cfg.MaxBodyBytes,
			MaxLines: cfg.BatchMaxLines, MaxBytes: cfg.BatchMaxBytes, Concurrency: cfg.BatchConcurrency, Window: cfg.BatchWindow,
		})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	s.mux, s.other = s.routes()
	return s, nil
}

// writeGrace is the time a chat completion has, past its body's and its
// own time, to write its end (an error event on a timeout).
const writeGrace = 10 * time.Second

// requestIDHeader names the response header that carries a request's
// id, which the server's log lines about the request carry too.
const requestIDHeader = "X-Request-Id"

// requestIDKey is the context key of a request's id.
type requestIDKey struct{}

// requestIDFrom returns the id of the request of ctx, or "".
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ServeHTTP routes a request. Every answer carries the request's id in
// its X-Request-Id header.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := newID("req_")
	w.Header().Set(requestIDHeader, id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// The body must come within BodyTimeout (UploadTimeout for a
		// file); the deadline is lifted once it is in.
		timeout := s.cfg.BodyTimeout
		if r.Method == http.MethodPost && r.URL.Path == "/v1/files" {
			timeout = s.cfg.UploadTimeout
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			b := &deadlineBody{ReadCloser: r.Body, rc: rc}
			r.Body = b
			defer b.finish()
		}
	}
	switch r.URL.Path {
	case "/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings":
		// A client that reads its answer too slowly does not hold the
		// request past its time.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.BodyTimeout + s.cfg.RequestTimeout + writeGrace))
	}
	if r.Method != http.MethodConnect && r.URL.Path != cleanPath(r.URL.Path) {
		// The mux would redirect to the clean path: no route has it.
		s.other.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// cleanPath returns p as http.ServeMux cleans it: rooted, without "."
// and ".." elements or doubled slashes, with its trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// health answers GET /health.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		writeError(w, errShutdown)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// listModels answers GET /v1/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authenticate(r); !ok {
		writeError(w, errAuth)
		return
	}
	s.writeModels(w)
}

// enter counts a chat completion in, unless the server is shutting down.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active++
	return true
}

func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// track registers x, unless the server is draining.
func (s *Server) track(x *executor) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.running == nil {
		s.running = map[*executor]struct{}{}
	}
	s.running[x] = struct{}{}
	return true
}

func (s *Server) untrack(x *executor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, x)
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:]) // never fails
	return prefix + hex.EncodeToString(b[:])
}

// requestID returns a new completion ID.
func requestID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	call, ok := s.begin(w, r, "chat completion")
	defer call.end()
	if !ok {
		return
	}
	start, c := call.start, call.client

	var cr oaiwire.Request
	if e := s.readChat(w, r, &cr); e != nil {
		call.refuse(e)
		return
	}
	call.model = cr.Model
	m, input, e := s.modeFor(&cr, batchagent.Interactive)
	if e != nil {
		call.refuse(e)
		return
	}
	if m, e = s.withCap(c, m, cr.Model); e != nil {
		call.refuse(e)
		return
	}

	ctx, cancelTimeout := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	x := &executor{
		w: w, gone: r.Context().Done(), cancel: cancel,
		id: requestID(), model: cr.Model, created: start.Unix(),
		stream: cr.Stream, includeUsage: cr.IncludeUsage(), input: input,
		tracer: s.cfg.Tracer, recorder: s.cfg.Recorder,
	}
	if p, ok := s.cfg.Prices[cr.Model]; ok {
		x.price = &p
	}
	if !s.track(x) {
		call.refuse(errShutdown)
		return
	}
	defer s.untrack(x)
	if err := x.execute(ctx, m); err != nil {
		status := errorOf(err).status
		if errors.Is(err, errClientGone) {
			status = 499 // client closed request, as nginx logs it
		}
		call.failed(err, status)
	}
}

// modeFor returns the mode answering cr and the span's input, or the
// error to answer. A passthrough runs in class; an agent at its spec's
// priority, or in the batch class when class is.
func (s *Server) modeFor(cr *oaiwire.Request, class batchagent.Priority) (mode, string, *apiError) {
	if cr.Model == "" {
		return nil, "", badParam("model", "model is required")
	}
	if name, ok := strings.CutPrefix(cr.Model, AgentPrefix); ok {
		spec, ok := s.cfg.Agents[name]
		if !ok {
			return nil, "", unknownModel(cr.Model)
		}
		if class == batchagent.Batch {
			spec = s.batchAgents[name]
		}
		if cr.N != nil && *cr.N != 1 {
			return nil, "", badParam("n", "only n=1 is supported: an agent gives one answer")
		}
		if e := extraRefused(cr.Model, llm.ExtraFields{}, cr.Extra); e != nil {
			return nil, "", e // an agent sends no field of the client's on
		}
		in, media, e := agentInput(cr)
		if e != nil {
			return nil, "", e
		}
		if len(media) > 0 {
			model, _ := spec.Model()
			if e := mediaRefused(cr.Model, model, []llm.Message{{Role: llm.RoleUser, Parts: media}}); e != nil {
				// The parts' indexes are the agent's, not the request's.
				e.param = "messages"
				return nil, "", e
			}
		}
		return &agentRun{engine: s.cfg.Engine, name: name, spec: spec, input: in, media: media, observer: s.cfg.Observer, recorder: s.cfg.Recorder},
			lastUser(cr), nil
	}
	b, ok := s.cfg.Backends[cr.Model]
	if !ok {
		return nil, "", unknownModel(cr.Model)
	}
	req, e := llmRequest(cr)
	if e != nil {
		return nil, "", e
	}
	if e := mediaRefused(cr.Model, b.Model, req.Messages); e != nil {
		return nil, "", e
	}
	var x llm.ExtraFields
	if c, ok := b.Model.(llm.Capable); ok {
		x = c.Capabilities().Extra
	}
	if e := extraRefused(cr.Model, x, req.Extra); e != nil {
		return nil, "", e
	}
	req.Model = b.Name
	pt := &passthrough{engine: s.cfg.Engine, backend: b, class: class, req: req}
	if n := choicesOf(cr); n > 1 {
		if x.Verbatim && !x.OneChoice {
			// An OpenAI-compatible server answers n itself: n goes on
			// verbatim, its choices come back whole (llm.Extra.Choices).
			req.Extra = maps.Clone(req.Extra)
			if req.Extra == nil {
				req.Extra = map[string]json.RawMessage{}
			}
			req.Extra["n"] = json.RawMessage(strconv.Itoa(n))
		} else {
			// Any other backend answers one choice a call: n calls.
			return &fanout{calls: pt, n: n}, lastUser(cr), nil
		}
	}
	return pt, lastUser(cr), nil
}

// readChat reads r's body, whole, into cr. A body that is not one JSON
// value, names a key twice or holds text that is not UTF-8 (see
// checkJSON), or is larger than MaxBodyBytes is refused with the error
// to answer. Reading the body to its end also lets net/http watch the
// connection, and cancel the request's context when the client goes.
func (s *Server) readChat(w http.ResponseWriter, r *http.Request, cr *oaiwire.Request) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return s.bodyError(err)
	}
	if je := oaiwire.CheckJSON(body); je != nil {
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json", param: je.Param(),
			message: "request body: " + je.Error()}
	}
	if err := json.Unmarshal(body, cr); err != nil {
		e := &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json",
			message: "request body is not a chat completions request: " + err.Error()}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			e.param = te.Field // a member of the wrong type ("n": "2") is named
		}
		return e
	}
	if err := cr.ReadExtra(body); err != nil {
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_json",
			message: "request body is not a JSON object: " + err.Error()}
	}
	return nil
}

// bodyError is the answer to a failure to read a request body: 413 for
// one over MaxBodyBytes, 408 for one not in within BodyTimeout (both
// close the connection: what is left of the body is not read), 400
// otherwise.
func (s *Server) bodyError(err error) *apiError {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large", closeConn: true,
			message: fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxBodyBytes)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error", code: "request_timeout", closeConn: true,
			message: fmt.Sprintf("the request body did not arrive within %v", s.cfg.BodyTimeout)}
	}
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_body", closeConn: true,
		message: "reading the request body: " + err.Error()}
}

func unknownModel(name string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model",
		message: fmt.Sprintf("the model %q does not exist (GET /v1/models lists them)", name)}
}

// lastUser returns the text of the last user message (its text parts,
// when it carries media), or "".
func lastUser(cr *oaiwire.Request) string {
	for i := len(cr.Messages) - 1; i >= 0; i-- {
		if cr.Messages[i].Role == "user" {
			text, parts, _ := cr.Messages[i].Parts()
			if len(parts) > 0 {
				text = partsText(parts)
			}
			return text
		}
	}
	return ""
}

func (s *Server) writeModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range s.models {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "batchagent"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

// ready answers 200 while the server is not shutting down and every
// backend that can report its queue (an llm.QueueProber declaring the
// probe: vLLM, SGLang, llama.cpp, the simulator) answers its probe within
// ReadyTimeout; backends that cannot be probed are taken as reachable.
// Otherwise it answers 503 naming the first backend that failed.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		writeError(w, errShutdown)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	for _, name := range s.models {
		b, ok := s.cfg.Backends[name]
		if !ok {
			continue
		}
		p, ok := b.Model.(llm.QueueProber)
		if c, capable := b.Model.(llm.Capable); !ok || !capable || !c.Capabilities().QueueProbe {
			continue
		}
		if _, err := p.QueueDepth(ctx); err != nil {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "backend_unavailable",
				message: fmt.Sprintf("backend %q is not reachable", name)})
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ready\n")
}

// Serve accepts HTTP connections on l and serves s on them until
// [Server.Shutdown]; it then returns nil (http.ErrServerClosed is not an
// error here). It may be called once. Connections are bounded by
// MaxConnections and MaxConnectionsPerClient, their requests' headers by
// HeaderTimeout and their idle waits by IdleTimeout.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.hs != nil || s.closed {
		s.mu.Unlock()
		return errors.New("server: Serve called twice or after Shutdown")
	}
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: s.cfg.HeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug)}
	hs := s.hs
	s.mu.Unlock()
	if err := hs.Serve(newConnLimiter(l, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerClient, s.cfg.Logger)); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown drains the gateway, as a load balancer expects of a server
// going away:
//
//  1. At once, /health and /ready answer 503, new requests (chat
//     completions, batches) are answered 503 with Retry-After, and
//     connections close after their answer in progress. So are the chat
//     completions not yet in flight — a passthrough still waiting for the
//     backend's admission, an agent not yet started: they are stopped
//     and answered 503 with Retry-After, to be sent again elsewhere. The
//     batches running stop, their lines in flight cancelled and left
//     unrecorded (a server started later on the same store resumes them).
//  2. The chat completions in flight finish, until ctx ends: a
//     passthrough the backend admitted (holding a slot, its prompt being
//     read, though no token has come yet), an agent that has begun (its
//     first turn's progress event comes as it starts). Then those left
//     are stopped, each ended with an error (a stream's error event).
//  3. The HTTP server of [Server.Serve], if any, stops listening and
//     closes its connections, and the engine shuts down with ctx (see
//     [batchagent.Engine.Shutdown]).
//
// It returns ctx's error when ctx ended before the chat completions did.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	hs := s.hs
	var idle chan struct{}
	if s.active > 0 {
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle = s.idle
	}
	var waiting []*executor
	for x := range s.running {
		if x.stopWaiting() {
			waiting = append(waiting, x)
		}
	}
	s.mu.Unlock()
	if hs != nil {
		hs.SetKeepAlivesEnabled(false) // closes the idle connections too
	}
	for _, x := range waiting {
		x.cancel(errDraining)
	}
	if s.batches != nil {
		s.batches.Stop()
	}
	var errs []error
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			s.mu.Lock()
			for x := range s.running {
				x.cancel(errGraceOver)
			}
			s.mu.Unlock()
			<-idle // stopped, each ends at once
		}
	}
	if hs != nil {
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close() // ctx ended: the connections left go at once
		}
	}
	if err := s.cfg.Engine.Shutdown(ctx); err != nil && ctx.Err() == nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
