package report

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/batchagent/batchagent"
)

// Live serves a run's live page from its [Sampler]: GET / is the page
// (the same charts and counters as the report, and a results table),
// GET /events a stream of server-sent events, "sample" after each sample
// and "done" once the run has ended, each a JSON frame of the counters
// and the charts, which the page's script swaps in, and GET /results the
// results table's rows as JSON ([Results]): the latest MaxLiveRows
// failures and the latest MaxLiveRows other results, which the page
// fetches after each event. After the run it goes on serving the final
// state. A slow client never holds the run up: it gets the latest frame
// when it is ready for one, and misses those in between. Each event
// stream ends when its client leaves, when the server's base context
// ends, or after the "done" event. Live is safe for concurrent use.
type Live struct {
	s      *Sampler
	recent *recent // the results table's rows; nil: results the Sampler saw are not kept

	mu sync.Mutex // protects the cache below
	// frameOf is the channel Changed returned when frame was rendered:
	// until it is closed, frame is current.
	frameOf <-chan struct{}
	frame   []byte
}

// NewLive returns the live page of s. Its results table shows the results
// handed to [Live.Result].
func NewLive(s *Sampler) *Live { return &Live{s: s, recent: &recent{price: s.cfg.Info.Price}} }

// Result records a finished agent for the results table. The engine's
// OnResult calls it (see [Monitor.OnResult]).
func (l *Live) Result(r *batchagent.Result) { l.recent.add(r) }

// frame is one event's data.
type frame struct {
	Counters []counter `json:"counters"`
	Charts   []chart   `json:"charts"`
}

// current returns the latest frame as JSON, rendered once per sample
// however many clients ask, and whether the run is done.
func (l *Live) current() ([]byte, bool) {
	// Done first: once it is closed, the last sample is taken, and the
	// frame rendered below holds it.
	done := false
	select {
	case <-l.s.Done():
		done = true
	default:
	}
	changed := l.s.Changed()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frame == nil || l.frameOf != changed {
		d := l.s.Data()
		// Marshal cannot fail: strings, numbers and template.HTML.
		l.frame, _ = json.Marshal(frame{Counters: counters(d), Charts: charts(d)})
		l.frameOf = changed
	}
	return l.frame, done
}

// ServeHTTP serves the page at / and the events at /events.
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		d := l.s.Data()
		d.Results = l.recent.results()
		p := newPage(d, true)
		_ = p.writeTo(w) // the client left
	case "/results":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(l.recent.results()) // the client left
	case "/events":
		l.events(w, r)
	default:
		http.NotFound(w, r)
	}
}

// events streams the frames to one client until it leaves, the server's
// context ends or the run is done.
func (l *Live) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for {
		changed := l.s.Changed()
		data, done := l.current()
		event := "sample"
		if done {
			event = "done"
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return // the client left
		}
		if err := rc.Flush(); err != nil || done {
			return
		}
		select {
		case <-changed:
		case <-l.s.Done():
		case <-r.Context().Done():
			return
		}
	}
}
