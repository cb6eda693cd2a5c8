package server

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"

	"github.com/batchagent/batchagent/internal/prices"
	"github.com/batchagent/batchagent/internal/spend"
	"github.com/batchagent/batchagent/llm"
)

// budgetExceeded is the answer to a request of a key over its spend cap:
// 429, as OpenAI answers an account out of quota, with the code
// budget_exceeded and no Retry-After (the cap does not refill).
func budgetExceeded(c *client) *apiError {
	return &apiError{status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "budget_exceeded",
		message: fmt.Sprintf("this API key (%s) reached its spend cap: $%.4f spent of max_cost $%.4f; no new model call starts for it", c.name, c.cap.Spent(), c.cap.Limit())}
}

// overBudget returns the 429 to answer when c is a key whose spend cap
// leaves no room for any call, or nil.
func overBudget(c *client) *apiError {
	if c == nil || c.cap == nil {
		return nil
	}
	if c.cap.Reached() || c.cap.Spent() >= c.cap.Limit() {
		return budgetExceeded(c)
	}
	return nil
}

// capPrice returns the price a capped key's request for model is counted
// at: the server's Prices for the name asked for, else the built-in
// table's for the model sent upstream (upstream) or the name asked for.
// A model of no known price is refused: a cap that cannot count is not
// passed silently.
func (s *Server) capPrice(model, upstream string) (llm.Price, *apiError) {
	if p, ok := s.cfg.Prices[model]; ok {
		return p, nil
	}
	for _, m := range []string{upstream, model} {
		if p, ok := prices.Lookup(m); m != "" && ok {
			return p, nil
		}
	}
	prices.Warn(s.cfg.Logger, model, "the serve config's prices")
	return llm.Price{}, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "model_price_unknown", param: "model",
		message: fmt.Sprintf("the model %q has no known price and this API key has a spend cap (max_cost), which cannot count it: ask for a priced model, or have the server's config set prices.%s", model, model)}
}

// capped is a mode whose calls are counted against a key's spend cap:
// each reserves worst (the passthrough's worst case; 0 for an agent,
// whose calls are not known in advance) before it starts, and settles
// with the usage the answer reports.
type capped struct {
	m     mode
	c     *client
	price llm.Price
	worst float64
}

// withCap returns m counted against c's spend cap, or m when c has none.
// The error is the answer to give instead.
func (s *Server) withCap(c *client, m mode, model string) (mode, *apiError) {
	if c == nil || c.cap == nil {
		return m, nil
	}
	if e := overBudget(c); e != nil {
		return nil, e
	}
	cm := &capped{m: m, c: c}
	var upstream string
	switch m := m.(type) {
	case *passthrough:
		upstream = m.req.Model
	case *fanout:
		upstream = m.calls.req.Model
	case *agentRun:
		upstream = m.spec.Def().ModelName
	}
	p, e := s.capPrice(model, upstream)
	if e != nil {
		return nil, e
	}
	cm.price = p
	// A request for n choices may cost n answers: n × max_tokens (and,
	// fanned out, n prompts).
	switch m := m.(type) {
	case *passthrough:
		n := 1
		if v, err := strconv.Atoi(string(m.req.Extra["n"])); err == nil && v > 1 {
			n = v
		}
		cm.worst = spend.Worst(m.req, p) * float64(n)
	case *fanout:
		cm.worst = spend.Worst(m.calls.req, p) * float64(m.n)
	}
	return cm, nil
}

func (m *capped) chunks(ctx context.Context, admitted func()) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		if err := m.c.cap.Reserve(ctx, m.worst); err != nil {
			if errors.Is(err, spend.ErrCapReached) {
				err = budgetExceeded(m.c)
			}
			yield(chunk{}, err)
			return
		}
		var (
			usage    llm.Usage
			hasUsage bool
			answered bool
		)
		defer func() {
			cost := 0.0
			switch {
			case hasUsage:
				cost = m.price.Cost(usage)
			case answered:
				// An answer without usage: counted at its worst case.
				cost = m.worst
			}
			m.c.cap.Settle(m.worst, cost)
		}()
		for ch, err := range m.m.chunks(ctx, admitted) {
			if err == nil {
				switch ch.kind {
				case chunkUsage:
					usage, hasUsage = usage.Add(ch.usage), true
				case chunkText, chunkToolCall, chunkFinish:
					answered = true
				}
			}
			if !yield(ch, err) {
				return
			}
		}
	}
}

// KeySpend is what one API key with a spend cap has spent.
type KeySpend struct {
	// Name is the key's name (never the key).
	Name string
	// Spent and Reserved are the dollars spent by its answered calls and
	// reserved by those in flight; Limit is its max_cost.
	Spent, Reserved, Limit float64
}

// Spend returns the spend of every key with a spend cap, in Config.Keys
// order: counted since the server started (the count is per process).
func (s *Server) Spend() []KeySpend {
	var out []KeySpend
	for _, c := range s.clients {
		if c.cap != nil {
			out = append(out, KeySpend{Name: c.name, Spent: c.cap.Spent(), Reserved: c.cap.Reserved(), Limit: c.cap.Limit()})
		}
	}
	return out
}

// clientByOwner returns the key whose owner (see client.owner) is owner,
// or nil.
func (s *Server) clientByOwner(owner string) *client {
	for _, c := range s.clients {
		if c.owner() == owner {
			return c
		}
	}
	return nil
}
