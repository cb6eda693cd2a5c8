package server

import (
	"net/http"
	"strings"

	"github.com/batchagent/batchagent/server/batchapi"
)

// route is a ServeMux pattern and its handler, instrumented as label.
type route struct {
	label, pattern string
	h              http.Handler
}

// errNoStore answers the Batch API's routes on a server without a store.
var errNoStore = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "the Batch API is not enabled on this server (no data directory)"}

// routes returns the server's mux and its handler of unknown paths. A
// route's method patterns are backed by one without a method that
// answers the other methods 405 (404 on the Batch API, as OpenAI's
// does), in OpenAI's error format: ServeMux's own 405 is plain text.
func (s *Server) routes() (*http.ServeMux, http.Handler) {
	answer := func(e *apiError) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { writeError(w, e) }
	}
	rs := []route{
		{"/health", "GET /health", http.HandlerFunc(s.health)},
		{"/health", "/health", answer(errMethod)},
		{"/ready", "GET /ready", http.HandlerFunc(s.ready)},
		{"/ready", "/ready", answer(errMethod)},
		{"/v1/models", "GET /v1/models", http.HandlerFunc(s.listModels)},
		{"/v1/models", "/v1/models", answer(errMethod)},
		{"/v1/models", "GET /v1/models/{model...}", http.HandlerFunc(s.retrieveModel)},
		{"/v1/models", "/v1/models/", answer(errMethod)},
		{"/v1/embeddings", "POST /v1/embeddings", s.forwardHandler("/v1/embeddings")},
		{"/v1/embeddings", "/v1/embeddings", answer(errMethod)},
		{"/v1/completions", "POST /v1/completions", s.forwardHandler("/v1/completions")},
		{"/v1/completions", "/v1/completions", answer(errMethod)},
		{"/v1/responses", "POST /v1/responses", http.HandlerFunc(s.responses)},
		{"/v1/responses", "/v1/responses", answer(errMethod)},
		{"/v1/chat/completions", "POST /v1/chat/completions", http.HandlerFunc(s.chat)},
		{"/v1/chat/completions", "/v1/chat/completions", answer(errMethod)},
		{"other", "/", answer(errNotFound)},
	}
	if s.cfg.Metrics != nil {
		rs = append(rs, route{"/metrics", "GET /metrics", s.cfg.Metrics}, route{"/metrics", "/metrics", answer(errMethod)})
	} else {
		rs = append(rs, route{"/metrics", "/metrics", answer(errNotFound)})
	}
	if s.batches == nil {
		for _, p := range []string{"/v1/files", "/v1/files/", "/v1/batches", "/v1/batches/"} {
			rs = append(rs, route{strings.TrimSuffix(p, "/"), p, answer(errNoStore)})
		}
	} else {
		for p, h := range s.batches.Routes() {
			label := "/v1/batches"
			if strings.Contains(p, "/v1/files") {
				label = "/v1/files"
			}
			rs = append(rs, route{label, p, s.owner(h)})
		}
	}
	return newMux(rs, s.cfg.Instrument)
}

// owner authenticates a request of the Batch API and names its owner,
// the key's hash, for the handler h.
func (s *Server) owner(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.authenticate(r)
		if !ok {
			writeError(w, errAuth)
			return
		}
		// A key over its spend cap starts no new batch.
		if r.Method == http.MethodPost && r.URL.Path == "/v1/batches" {
			if e := overBudget(c); e != nil {
				writeError(w, e)
				return
			}
		}
		// Each key sees its own files and batches only; without keys, all
		// are everyone's.
		h.ServeHTTP(w, r.WithContext(batchapi.WithOwner(r.Context(), c.owner())))
	})
}

// newMux returns a mux of routes, each label's handlers wrapped once by
// instrument (when not nil), and the handler of the label "other".
func newMux(routes []route, instrument func(string, http.Handler) http.Handler) (*http.ServeMux, http.Handler) {
	if instrument == nil {
		instrument = func(_ string, h http.Handler) http.Handler { return h }
	}
	byLabel := map[string]map[string]http.Handler{} // label → pattern → handler
	for _, rt := range routes {
		if byLabel[rt.label] == nil {
			byLabel[rt.label] = map[string]http.Handler{}
		}
		byLabel[rt.label][rt.pattern] = rt.h
	}
	mux := http.NewServeMux()
	var other http.Handler
	for label, byPattern := range byLabel {
		// The mux names the pattern it matched in r.Pattern.
		h := instrument(label, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h, ok := byPattern[r.Pattern]
			if !ok {
				h = byPattern["/"] // unclean paths, which no pattern matched
			}
			h.ServeHTTP(w, r)
		}))
		for p := range byPattern {
			mux.Handle(p, h)
		}
		if label == "other" {
			other = h
		}
	}
	return mux, other
}
