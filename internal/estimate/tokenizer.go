package estimate

import (
	"fmt"
	"strings"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/internal/tokens"
	"github.com/batchagent/batchagent/llm"
)

// counter counts tokens as the backend a job runs on counts them.
type counter interface {
	// Count returns the prompt tokens of req.
	Count(req *llm.Request) int
	// Text returns the completion tokens of an answer whose text (or
	// tool calls' names and arguments) is s.
	Text(s string) int
	// profile returns the sizes of the backend's typical answers.
	profile() answerProfile
	// additive reports whether a request's count is the sum of its
	// parts' (the shared prefix and each input's own messages), so that
	// the prefix need not be counted again for every input.
	additive() bool
}

// answerProfile is the sizes of a backend's typical answers, the point
// estimate's.
type answerProfile struct {
	typicalString int // characters of a string without a fixed length
	freeText      int // tokens of an answer without an output schema
}

// The typical answers of a model and of the simulator (a few random
// words a string; "Done." and eight words of free text).
var (
	modelAnswers = answerProfile{typicalString: 40, freeText: 100}
	simAnswers   = answerProfile{typicalString: 12, freeText: 15}
)

// tokenizer is the counter of the backend at a URL, with the name a
// report gives it.
type tokenizer struct {
	counter
	name string
	// billing is how the backend bills media parts' prompt tokens.
	billing media.Billing
	// sim is the in-process simulator's configuration on sim://, whose
	// tool turns and rates the estimate then knows; nil otherwise.
	sim *sim.Config
}

// tokenizerFor returns the counter of the backend at url serving model:
// the simulator's own count on sim:// and sim+http://, else tiktoken's
// (the model's own vocabulary for an OpenAI model, o200k_base standing in
// for others).
func tokenizerFor(url, model string) (tokenizer, error) {
	scheme, _, _ := strings.Cut(url, "://")
	switch scheme {
	case "sim":
		cfg, err := sim.ParseURL(url)
		if err != nil {
			return tokenizer{}, err
		}
		return tokenizer{counter: simCounter{}, name: "sim (the simulator's own: 4 bytes a token)", sim: &cfg, billing: cfg.MediaTokens}, nil
	case "sim+http":
		// The server bills media as its model's media_tokens says:
		// OpenAI's tiles unless it was started otherwise.
		return tokenizer{counter: simHTTPCounter{}, name: "sim+http (the simulator server's own: its chat template, 4 bytes a token)", billing: media.DefaultBilling}, nil
	}
	billing := media.BillingOpenAI
	if strings.HasPrefix(scheme, "anthropic") || scheme == "bedrock" {
		billing = media.BillingAnthropic
	}
	c, err := tokens.New(model)
	if err != nil {
		return tokenizer{}, err
	}
	name := fmt.Sprintf("tiktoken %s (%s's own)", c.Encoding(), model)
	if !c.Known() {
		name = fmt.Sprintf("tiktoken %s (standing in for %s's own tokenizer: expect counts some percent off)", c.Encoding(), model)
	}
	return tokenizer{counter: tiktoken{c}, name: name, billing: billing}, nil
}

// media returns the prompt tokens of media part p as the backend bills
// it ([media.Tokens]): an image by its size (one passed by URL as a
// 1024×1024 image), a document by its pages, audio by its duration.
func (t tokenizer) media(p *llm.Part) int { return media.Tokens(p, t.billing) }

// tiktoken counts with a BPE vocabulary.
type tiktoken struct{ c *tokens.Counter }

func (t tiktoken) Count(req *llm.Request) int { return t.c.Count(req) }
func (t tiktoken) Text(s string) int          { return t.c.Text(s) }
func (tiktoken) additive() bool               { return true }
func (tiktoken) profile() answerProfile       { return modelAnswers }

// simCounter counts as the in-process simulator does.
type simCounter struct{}

func (simCounter) Count(req *llm.Request) int { return sim.PromptTokens(req) }
func (simCounter) Text(s string) int          { return sim.TextTokens(s) }
func (simCounter) additive() bool             { return false }
func (simCounter) profile() answerProfile     { return simAnswers }

// simHTTPCounter counts as the simulator's HTTP server does.
type simHTTPCounter struct{}

// Count returns the server's count; a request the server would refuse is
// counted as the in-process simulator counts it.
func (simHTTPCounter) Count(req *llm.Request) int {
	n, err := simhttp.PromptTokens(req)
	if err != nil {
		return sim.PromptTokens(req)
	}
	return n
}
func (simHTTPCounter) Text(s string) int      { return sim.TextTokens(s) }
func (simHTTPCounter) additive() bool         { return false }
func (simHTTPCounter) profile() answerProfile { return simAnswers }
