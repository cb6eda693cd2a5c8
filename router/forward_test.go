package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/router"
)

// TestForwardFailsOver: an embeddings body sent through the router is
// answered by the deployment that is up when the other cannot be reached,
// and a router whose deployments serve no such endpoint says so.
func TestForwardFailsOver(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	cfg, err := openai.ParseURL("openai+" + dead.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	down, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	up, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(t, router.Config{Deployments: []router.Deployment{{Name: "down", Model: down, Weight: 10}, {Name: "up", Model: up}}})
	for range 3 {
		resp, err := r.Forward(context.Background(), "/v1/embeddings", []byte(`{"model":"m","input":"hello","dimensions":4}`))
		if err != nil {
			t.Fatalf("Forward: %v", err)
		}
		var out struct {
			Data []struct {
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &out); err != nil || len(out.Data) != 1 || len(out.Data[0].Embedding) != 4 {
			t.Fatalf("answer %s (%v), want one embedding of 4", b, err)
		}
	}
	if s := statsOf(r, "up"); s.Requests < 3 {
		t.Errorf("up deployment: %+v, want the 3 calls", s)
	}

	plain := newRouter(t, router.Config{Deployments: []router.Deployment{{Name: "plain", Model: &fakeModel{name: "plain"}}}})
	if _, err := plain.Forward(context.Background(), "/v1/embeddings", []byte(`{}`)); !errors.Is(err, llm.ErrBadRequest) {
		t.Errorf("Forward to a model without the endpoint = %v, want ErrBadRequest", err)
	}
}

// TestExtraFieldsOfDeployments: a router takes the extra request fields
// that every deployment sends on, and no other.
func TestExtraFieldsOfDeployments(t *testing.T) {
	verbatim := &capModel{caps: llm.Capabilities{Extra: llm.ExtraFields{Verbatim: true}}}
	topK := &capModel{caps: llm.Capabilities{Extra: llm.ExtraFields{Translated: "top_k user"}}}
	none := &capModel{}
	for _, c := range []struct {
		name    string
		deps    []llm.Model
		accepts []string
		refuses []string
	}{
		{"all verbatim", []llm.Model{verbatim, verbatim}, []string{"logprobs", "top_k"}, nil},
		{"verbatim and translating", []llm.Model{verbatim, topK}, []string{"top_k", "user"}, []string{"logprobs"}},
		{"one takes none", []llm.Model{verbatim, none}, nil, []string{"logprobs", "top_k"}},
	} {
		var deps []router.Deployment
		for _, m := range c.deps {
			deps = append(deps, router.Deployment{Model: m})
		}
		x := newRouter(t, router.Config{Deployments: deps}).Capabilities().Extra
		for _, f := range c.accepts {
			if !x.Accepts(f) {
				t.Errorf("%s: %q refused (%+v)", c.name, f, x)
			}
		}
		for _, f := range c.refuses {
			if x.Accepts(f) {
				t.Errorf("%s: %q accepted (%+v)", c.name, f, x)
			}
		}
	}
}

// capModel is a model that declares caps.
type capModel struct {
	fakeModel
	caps llm.Capabilities
}

func (m *capModel) Capabilities() llm.Capabilities { return m.caps }
