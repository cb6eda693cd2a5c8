package server_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/server"
)

// otherKey is the key without a cap in the spend-cap tests.
const otherKey = "sk-gateway-other-key"

// capPrice is the price of model "sim" in the spend-cap tests: a dollar
// per thousand tokens, so that a call costs cents.
var capPrice = server.Price{Input: 1000, Output: 1000}

// capGateway is a gateway over the simulator as "sim" (priced) and
// "mystery" (no price) with two keys: testKey capped at maxCost dollars,
// otherKey without a cap.
func capGateway(t *testing.T, maxCost float64) *gateway {
	t.Helper()
	m := newSim(t, sim.Config{Seed: 7, ToolTurns: -1})
	return newGateway(t, server.Config{
		Backends: map[string]batchagent.Backend{"sim": {Model: m, Name: "sim"}, "mystery": {Model: m, Name: "mystery"}},
		Keys: []server.Key{
			{Name: "capped", SHA256: server.HashKey(testKey), MaxCost: maxCost},
			{Name: "free", SHA256: server.HashKey(otherKey)},
		},
		Prices: map[string]server.Price{"sim": capPrice},
	})
}

// capParams is a request for "sim" of at most 16 completion tokens.
func capParams() openai.ChatCompletionNewParams {
	p := userParams("sim", "Say hello.")
	p.MaxCompletionTokens = openai.Int(16)
	return p
}

// budgetErr checks err is the 429 budget_exceeded a client sees, without
// Retry-After.
func budgetErr(t *testing.T, err error) {
	t.Helper()
	ae, ok := errors.AsType[*openai.Error](err)
	if !ok {
		t.Fatalf("err = %v, want an *openai.Error", err)
	}
	if ae.StatusCode != http.StatusTooManyRequests || ae.Code != "budget_exceeded" || ae.Type != "insufficient_quota" {
		t.Errorf("error = %d %q %q (%s), want 429 budget_exceeded insufficient_quota", ae.StatusCode, ae.Code, ae.Type, ae.Message)
	}
	if ra := ae.Response.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After = %q, want none: the cap does not refill", ra)
	}
}

// TestKeySpendCap: the capped key's calls stop with 429 budget_exceeded
// once its spend leaves no room for another, having spent no more than
// the cap plus one call; the other key keeps working.
func TestKeySpendCap(t *testing.T) {
	const maxCost = 0.25
	g := capGateway(t, maxCost)
	capped, free := g.client(testKey), g.client(otherKey)
	var (
		ok      int
		maxCall float64
		last    error
	)
	for range 100 {
		resp, err := capped.Chat.Completions.New(t.Context(), capParams())
		if err != nil {
			last = err
			break
		}
		ok++
		maxCall = max(maxCall, float64(resp.Usage.PromptTokens+resp.Usage.CompletionTokens)*1000/1e6)
	}
	if last == nil {
		t.Fatalf("%d calls answered, none refused: the cap of $%v did not stop the key", ok, maxCost)
	}
	budgetErr(t, last)
	if ok == 0 {
		t.Fatal("no call answered before the cap")
	}
	sp := g.srv.Spend()
	t.Logf("%d calls answered before the cap; spend %+v; one call at most $%v", ok, sp, maxCall)
	if len(sp) != 1 || sp[0].Name != "capped" || sp[0].Limit != maxCost {
		t.Fatalf("Spend() = %+v, want the capped key's", sp)
	}
	if sp[0].Spent > maxCost+maxCall || sp[0].Spent <= 0 || sp[0].Reserved != 0 {
		t.Errorf("spent $%v (reserved $%v) after %d calls; want in (0, %v]: the cap plus one call's cost", sp[0].Spent, sp[0].Reserved, ok, maxCost+maxCall)
	}
	// Refused from now on, as a stream too.
	_, err := capped.Chat.Completions.New(t.Context(), capParams())
	budgetErr(t, err)
	stream := capped.Chat.Completions.NewStreaming(t.Context(), capParams())
	for stream.Next() {
	}
	budgetErr(t, stream.Err())
	stream.Close()
	// The other key is not affected.
	for range 3 {
		if _, err := free.Chat.Completions.New(t.Context(), capParams()); err != nil {
			t.Fatalf("uncapped key: %v", err)
		}
	}
	if got := g.srv.Spend()[0].Spent; got != sp[0].Spent {
		t.Errorf("capped key's spend moved from $%v to $%v on the other key's calls", sp[0].Spent, got)
	}
}

// TestKeySpendCapConcurrent: calls of the capped key at once never spend
// past the cap by more than what reservations allow: each call reserves
// its worst case before it starts.
func TestKeySpendCapConcurrent(t *testing.T) {
	const maxCost = 0.2
	g := capGateway(t, maxCost)
	c := g.client(testKey)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, over int
	)
	for range 40 {
		wg.Go(func() {
			_, err := c.Chat.Completions.New(t.Context(), capParams())
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
				return
			}
			if ae, isAPI := errors.AsType[*openai.Error](err); isAPI && ae.Code == "budget_exceeded" {
				over++
				return
			}
			t.Errorf("call: %v", err)
		})
	}
	wg.Wait()
	sp := g.srv.Spend()[0]
	t.Logf("%d answered, %d refused; spend %+v", ok, over, sp)
	if ok == 0 || over == 0 {
		t.Errorf("%d answered, %d refused; want both", ok, over)
	}
	// A call's worst case here is its prompt estimate plus 16 tokens at
	// $0.001: the spend stays under the cap unless an answer used more
	// prompt tokens than estimated; never by a whole call.
	if sp.Spent > maxCost+0.01 || sp.Reserved != 0 {
		t.Errorf("spent $%v (reserved $%v) over %d answered calls, cap $%v: overspent", sp.Spent, sp.Reserved, ok, maxCost)
	}
}

// TestKeySpendCapUnknownPrice: a capped key's request for a model of no
// known price is refused, never passed uncounted; the other key's is not.
func TestKeySpendCapUnknownPrice(t *testing.T) {
	g := capGateway(t, 1)
	_, err := g.client(testKey).Chat.Completions.New(t.Context(), userParams("mystery", "Say hello."))
	ae, ok := errors.AsType[*openai.Error](err)
	if !ok || ae.StatusCode != http.StatusBadRequest || ae.Code != "model_price_unknown" {
		t.Fatalf("err = %v, want 400 model_price_unknown", err)
	}
	if _, err := g.client(otherKey).Chat.Completions.New(t.Context(), userParams("mystery", "Say hello.")); err != nil {
		t.Errorf("uncapped key: %v", err)
	}
}

// TestKeyMaxCostInvalid: a negative or infinite max_cost is refused at
// start, naming the key.
func TestKeyMaxCostInvalid(t *testing.T) {
	e, err := batchagent.New(batchagent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(t.Context())
	_, err = server.New(server.Config{Engine: e, Keys: []server.Key{{Name: "bad", SHA256: server.HashKey("k"), MaxCost: -1}}})
	if err == nil || !strings.Contains(err.Error(), "bad") || !strings.Contains(err.Error(), "max_cost") {
		t.Errorf("New = %v, want an error naming key bad's max_cost", err)
	}
}

// TestKeySpendCapBatch: a capped key's batch lines past its cap are
// answered 429 budget_exceeded at once (not asked again until the window
// ends), the batch completes, and the key's next batch is refused; the
// spend stays within the cap.
func TestKeySpendCapBatch(t *testing.T) {
	// A line sets no max_tokens: its worst case is 4096 completion tokens,
	// $0.004096 at a dollar per million; it really costs a few hundred
	// thousandths of a cent, so about a dozen lines fit.
	const maxCost = 0.0045
	g := batchGateway(t, t.TempDir(), server.Config{
		Keys:   []server.Key{{Name: "capped", SHA256: server.HashKey(testKey), MaxCost: maxCost}},
		Prices: map[string]server.Price{"sim": {Input: 1, Output: 1}},
	}, sim.Config{Seed: 1, ToolTurns: -1})
	c := g.client(testKey)
	const n = 40
	done := waitBatch(t, c, submitBatch(t, c, batchInput(n, nil)).ID)
	if done.Status != openai.BatchStatusCompleted {
		t.Fatalf("batch = %s, want completed", done.Status)
	}
	out, errs := results(t, c, done, n)
	var ok, over int
	for _, m := range []map[string]resultLine{out, errs} {
		for id, r := range m {
			switch {
			case r.Response != nil && r.Response.StatusCode == http.StatusOK:
				ok++
			case r.Response != nil && r.Response.StatusCode == http.StatusTooManyRequests && strings.Contains(string(r.Response.Body), `"budget_exceeded"`):
				over++
			default:
				t.Errorf("line %s: %+v, want 200 or 429 budget_exceeded", id, r)
			}
		}
	}
	sp := g.srv.Spend()[0]
	t.Logf("%d lines answered, %d refused for the cap; spend %+v", ok, over, sp)
	if ok == 0 || over == 0 {
		t.Errorf("%d answered, %d refused; want both", ok, over)
	}
	if sp.Spent > maxCost {
		t.Errorf("spent $%v, over the cap $%v", sp.Spent, maxCost)
	}
	f, err := c.Files.New(t.Context(), openai.FileNewParams{File: openai.File(strings.NewReader(string(batchInput(1, nil))), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	_, err = c.Batches.New(t.Context(), openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	budgetErr(t, err)
}

// TestKeySpendCapAgent: an agent's calls count against the key's cap at
// the agent's price; once spent, the key's agent requests are refused.
func TestKeySpendCapAgent(t *testing.T) {
	spec, err := batchagent.NewSpec(batchagent.Def{
		ID: "echo", Model: newSim(t, sim.Config{Seed: 3, ToolTurns: -1}), ModelName: "sim", Priority: batchagent.Interactive,
		Task: "Answer: {input}",
	})
	if err != nil {
		t.Fatal(err)
	}
	const maxCost = 0.1
	g := newGateway(t, server.Config{
		Agents: map[string]*batchagent.Spec{"echo": spec},
		Keys:   []server.Key{{Name: "capped", SHA256: server.HashKey(testKey), MaxCost: maxCost}},
		Prices: map[string]server.Price{"agent:echo": capPrice},
	})
	c := g.client(testKey)
	var (
		ok      int
		maxCall float64
		last    error
	)
	for range 100 {
		resp, err := c.Chat.Completions.New(t.Context(), userParams("agent:echo", "hello"))
		if err != nil {
			last = err
			break
		}
		ok++
		maxCall = max(maxCall, float64(resp.Usage.PromptTokens+resp.Usage.CompletionTokens)*1000/1e6)
	}
	if last == nil {
		t.Fatalf("%d agent runs answered, none refused", ok)
	}
	budgetErr(t, last)
	sp := g.srv.Spend()[0]
	t.Logf("%d agent runs before the cap; spend %+v", ok, sp)
	if ok == 0 || sp.Spent < maxCost || sp.Spent > maxCost+maxCall {
		t.Errorf("%d runs, spent $%v; want at least one run and the cap $%v reached, passed by at most one run ($%v)", ok, sp.Spent, maxCost, maxCall)
	}
}
