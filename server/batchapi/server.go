package batchapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config].
const (
	DefaultMaxLines     = 50_000
	DefaultMaxBytes     = 200 << 20
	DefaultMaxBodyBytes = 8 << 20
	DefaultConcurrency  = 64
	DefaultWindow       = 24 * time.Hour
)

// ExecFunc answers one line's request body as a POST to its url would
// (/v1/chat/completions unless [EndpointFrom] of its context names
// another of [Endpoints]), never streamed, under the request id requestID: the answer's
// status, its JSON body, and the failure the body tells of (nil on
// success), whose whole cause goes to the log. It is called from many
// goroutines at once, with a context that ends when the batch's window
// does or the [Server] stops.
type ExecFunc func(ctx context.Context, requestID string, body json.RawMessage) (status int, answer json.RawMessage, err error)

// Config configures a [Server].
type Config struct {
	// Store keeps the files and batches. Required; the caller closes it
	// after [Server.Stop].
	Store *Store
	// Exec runs a batch's lines. Required.
	Exec ExecFunc
	// MaxLines caps the requests of a batch's input file. Defaults to
	// DefaultMaxLines (50,000).
	MaxLines int
	// MaxBytes caps an uploaded file. Defaults to DefaultMaxBytes (200
	// MB).
	MaxBytes int64
	// MaxBodyBytes caps the request body of a line (a longer line fails
	// the batch's validation). Defaults to DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// Concurrency caps the lines in flight at once, all batches together,
	// and so the memory their requests hold; batches running at once take
	// turns for the places. Defaults to DefaultConcurrency.
	Concurrency int
	// Window is how long a batch's completion window ("24h") lasts: a
	// batch not done by then ends expired. Tests shorten it. Defaults to
	// DefaultWindow (24h).
	Window time.Duration
	// Hold is the least time a batch takes: one whose lines are all done
	// sooner stays in_progress until Hold has passed since its runner
	// started (its creation, or the Server's start for a resumed batch),
	// as a provider's batch completes hours after it was created. The
	// simulator sets it (`batchagent sim serve --batch-delay`). Defaults
	// to none: a batch completes as soon as its lines are done.
	Hold time.Duration
	// Logger receives Warn lines for lines and batches that fail and
	// Error lines for the store's failures. Defaults to none: silent.
	Logger *slog.Logger
}

// Server serves the Batch API's routes (see [Server.Routes]) and runs
// the batches of its store, resuming the unfinished ones when it starts.
// It is safe for concurrent use.
type Server struct {
	cfg Config
	sem chan struct{} // a place per line in flight, all batches together

	ctx  context.Context // the runners' context, ended by Stop
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex // protects runners and starting runners
	runners map[string]*runner
}

// New returns a Server for cfg, with a runner started for each unfinished
// batch of cfg.Store, which [Server.Stop] stops. The error says what is
// wrong with cfg, or why the store could not be read.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Exec == nil {
		return nil, errors.New("batchapi: no store or no Exec")
	}
	if cfg.MaxLines < 0 || cfg.MaxBytes < 0 || cfg.MaxBodyBytes < 0 || cfg.Concurrency < 0 || cfg.Window < 0 || cfg.Hold < 0 {
		return nil, errors.New("batchapi: negative limit")
	}
	cfg.MaxLines = cmp.Or(cfg.MaxLines, DefaultMaxLines)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, sem: make(chan struct{}, cfg.Concurrency), runners: map[string]*runner{}}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if err := s.resume(context.Background()); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// Stop stops the runners and waits for them: the lines in flight are
// cancelled and left unrecorded, so a Server started later on the same
// store resumes them. Batches created after Stop are refused (503);
// reading files and batches still works.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stop()
	s.mu.Unlock()
	s.wg.Wait()
}

// endpointKey is the context key of a line's url.
type endpointKey struct{}

func withEndpoint(ctx context.Context, url string) context.Context {
	return context.WithValue(ctx, endpointKey{}, url)
}

// EndpointFrom returns the url of the batch line an [ExecFunc]'s context
// runs: one of [Endpoints], "/v1/chat/completions" when it names none.
func EndpointFrom(ctx context.Context) string {
	if u, _ := ctx.Value(endpointKey{}).(string); u != "" {
		return u
	}
	return batchEndpoint
}

// ownerKey is the context key of a request's owner.
type ownerKey struct{}

// WithOwner returns ctx naming owner as its request's owner: the files
// and batches a request creates belong to its owner, and it sees only
// its owner's. The caller authenticates requests (with an API key's
// hash, say) and names their owner before it hands them to the routes;
// a request without one is the owner "" (everyone's, as without keys).
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner ctx names (see [WithOwner]), or "". The
// context an [ExecFunc] gets names its batch's owner.
func OwnerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// ErrFinal, wrapped by an [ExecFunc]'s error, says its answer is final
// though its status is one that is otherwise asked again (429 for a key
// over its spend cap, which will not refill): the line is recorded as
// answered.
var ErrFinal = errors.New("final answer")

// ownerOf returns the owner of r (see WithOwner).
func ownerOf(r *http.Request) string {
	o, _ := r.Context().Value(ownerKey{}).(string)
	return o
}

// Routes yields the Batch API's http.ServeMux patterns and their
// handlers, for the caller's mux: /v1/files (upload, list, retrieve,
// content, delete) and /v1/batches (create, list, retrieve, cancel). A
// path under those with a method it lacks, or unknown, is answered 404
// (OpenAI's API does so), after the owner check of the id it names.
func (s *Server) Routes() iter.Seq2[string, http.Handler] {
	notFound := func(w http.ResponseWriter, _ *http.Request) { writeError(w, errNotFound) }
	routes := []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"POST /v1/files", s.uploadFile},
		{"GET /v1/files", func(w http.ResponseWriter, r *http.Request) { s.list(w, r, "files") }},
		{"/v1/files", notFound},
		{"GET /v1/files/{id}", s.getFile},
		{"DELETE /v1/files/{id}", s.deleteFile},
		{"/v1/files/{id}", notFound},
		{"GET /v1/files/{id}/content", s.fileContent},
		{"/v1/files/{id}/{what}", notFound},
		{"/v1/files/", notFound},
		{"POST /v1/batches", s.createBatch},
		{"GET /v1/batches", func(w http.ResponseWriter, r *http.Request) { s.list(w, r, "batches") }},
		{"/v1/batches", notFound},
		{"GET /v1/batches/{id}", s.getBatch},
		{"/v1/batches/{id}", notFound},
		{"POST /v1/batches/{id}/cancel", s.cancelBatch},
		{"/v1/batches/{id}/{what}", notFound},
		{"/v1/batches/", notFound},
	}
	return func(yield func(string, http.Handler) bool) {
		for _, rt := range routes {
			h := rt.h
			if strings.HasPrefix(rt.pattern, "GET ") {
				h = getOnly(h)
			}
			if strings.Contains(rt.pattern, "{id}") {
				h = s.owned(rt.pattern, h)
			}
			if !yield(rt.pattern, h) {
				return
			}
		}
	}
}

// getOnly answers HEAD, which a GET pattern matches too, with 404.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeError(w, errNotFound)
			return
		}
		h(w, r)
	}
}

// owned answers 404 for a request whose path names a file or batch
// (pattern's {id}) that does not exist or is another owner's, and passes
// the others to h.
func (s *Server) owned(pattern string, h http.HandlerFunc) http.HandlerFunc {
	table, what := "files", "file"
	if strings.Contains(pattern, "/v1/batches/") {
		table, what = "batches", "batch"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		mine, err := s.cfg.Store.owns(r.Context(), table, id, ownerOf(r))
		if err != nil {
			writeError(w, s.storeError(r.Context(), err))
			return
		}
		if !mine {
			writeError(w, notFound(what, id))
			return
		}
		h(w, r)
	}
}
