package respcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/batchagent/batchagent/llm"
)

// keyVersion changes when the canonical encoding does, so that entries
// written under another encoding are never read as answers.
const keyVersion = "respcache/v1"

// canonical is what identifies a request: everything that shapes the
// answer, nothing that does not (the agent's Input, which a real backend
// never sees).
type canonical struct {
	Version     string          `json:"version"`
	Model       string          `json:"model"`
	Messages    []llm.Message   `json:"messages"`
	Tools       []llm.ToolDef   `json:"tools,omitempty"`
	Output      *llm.OutputSpec `json:"output,omitempty"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	Seed        *int64          `json:"seed,omitempty"`
	Stop        []string        `json:"stop,omitempty"`
	// Extra is the request's extra fields (logprobs, top_k, a vendor's):
	// they change the answer. Absent when none, so that the keys of
	// requests without extras are those of before.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Key returns the cache key of req: the SHA-256, hex, of its canonical
// encoding, JSON with sorted keys in which media parts carry the hash of
// their bytes instead of the bytes.
func Key(req *llm.Request) (string, error) {
	c := canonical{
		Version: keyVersion, Model: req.Model, Tools: req.Tools, Output: req.Output,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed, Stop: req.Stop, Extra: req.Extra,
		Messages: make([]llm.Message, len(req.Messages)),
	}
	for i, m := range req.Messages {
		if len(m.Parts) > 0 {
			parts := make([]llm.Part, len(m.Parts))
			for k, p := range m.Parts {
				if len(p.Data) > 0 {
					sum := sha256.Sum256(p.Data)
					p.Data, p.Hash = nil, hex.EncodeToString(sum[:])
				}
				p.Ref = "" // where the bytes came from does not shape the answer
				parts[k] = p
			}
			m.Parts = parts
		}
		c.Messages[i] = m
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("respcache: encode request: %w", err)
	}
	// Through a generic value and back: encoding/json writes the keys of
	// a map sorted, so the schemas and tool arguments the request holds
	// as raw JSON are canonical too, whatever their key order.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("respcache: canonicalize request: %w", err)
	}
	if b, err = json.Marshal(v); err != nil {
		return "", fmt.Errorf("respcache: canonicalize request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// cacheable reports whether answers to req may be cached: sampled
// deterministically (temperature zero or unset, or a seed), unless
// nondeterministic answers are wanted too.
func cacheable(req *llm.Request, nondeterministic bool) bool {
	return nondeterministic || req.Seed != nil || req.Temperature == nil || *req.Temperature <= 0
}
