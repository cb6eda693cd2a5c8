package config

import (
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DeliveryConfig is the job file's delivery key: how model calls reach
// the backend. `delivery: batch` (or a backend URL with ?mode=batch) sends
// them through the provider's batch API at its batch price (package
// backend/batchmode): agents run turn by turn through batch rounds.
type DeliveryConfig struct {
	// Batch: through the provider's batch API; false: in real time (the
	// file's `delivery: realtime`).
	Batch bool
	// Linger is how long a call waits for others before a submission goes
	// out. Zero means batchmode's default.
	Linger time.Duration
	// PollEvery is how often each running batch is polled. Zero means
	// batchmode's default.
	PollEvery time.Duration
	// MinLines sends a submission as soon as this many calls wait. Zero
	// means the provider's most lines per batch.
	MinLines int
	// MaxEnqueuedTokens caps the prompt tokens of the batches running at
	// once (the account's enqueued-token limit). Zero means none.
	MaxEnqueuedTokens int64
}

// Delivery modes, as the file writes them.
const (
	deliveryBatch    = "batch"
	deliveryRealtime = "realtime"
)

func (c *DeliveryConfig) keys() keys {
	return keys{
		{"linger", &c.Linger},
		{"poll_every", &c.PollEvery},
		{"min_lines", &c.MinLines},
		{"max_enqueued_tokens", &c.MaxEnqueuedTokens},
	}
}

// deliveryField is the delivery key: batch, realtime, or a mapping with
// mode and the batch settings.
type deliveryField struct{ c **DeliveryConfig }

func (f deliveryField) decode(d *decoder, n *yaml.Node, path string) {
	c := new(DeliveryConfig)
	mode := func(n *yaml.Node, at string) {
		switch {
		case n.Kind == yaml.ScalarNode && n.Value == deliveryBatch:
			c.Batch = true
		case n.Kind == yaml.ScalarNode && n.Value == deliveryRealtime:
		default:
			d.problem(n, at, "expected %s or %s, got %s", deliveryBatch, deliveryRealtime, describe(n))
		}
	}
	switch n.Kind {
	case yaml.ScalarNode:
		mode(n, path)
	case yaml.MappingNode:
		var m *yaml.Node
		rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "mode" {
				m = n.Content[i+1]
				continue
			}
			rest.Content = append(rest.Content, n.Content[i], n.Content[i+1])
		}
		if m == nil {
			d.problem(n, path, "expected a mode (%s or %s)", deliveryBatch, deliveryRealtime)
			return
		}
		mode(m, join(path, "mode"))
		d.table(rest, path, c.keys())
		for _, k := range c.keys() {
			d.checkNotNegative(join(path, k.name), k.dst)
		}
		if !c.Batch && len(rest.Content) > 0 {
			d.problem(n, path, "%s sets batch settings but mode is %s", path, deliveryRealtime)
		}
	default:
		d.problem(n, path, "expected %s, %s or a mapping of mode, linger, poll_every, min_lines and max_enqueued_tokens, got %s", deliveryBatch, deliveryRealtime, describe(n))
		return
	}
	*f.c = c
}

func (f deliveryField) encode() (any, error) {
	c := *f.c
	switch {
	case c == nil:
		return nil, nil
	case !c.Batch:
		return deliveryRealtime, nil
	case *c == DeliveryConfig{Batch: true}:
		return deliveryBatch, nil
	}
	n, err := encodeTable(c.keys())
	if err != nil || n == nil {
		return deliveryBatch, err
	}
	node := n
	node.Content = append([]*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "mode"}, {Kind: yaml.ScalarNode, Value: deliveryBatch},
	}, node.Content...)
	return node, nil
}

// BatchURL reports whether the backend URL raw asks for batch delivery
// (?mode=batch).
func BatchURL(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	return err == nil && u.Query().Get("mode") == deliveryBatch
}

// BatchDelivery reports whether the job's model calls go through the
// provider's batch API: its delivery key says batch, or its backend URL
// (backend, the URL the run uses) has ?mode=batch.
func (j *Job) BatchDelivery(backend string) bool {
	if j.Delivery != nil && j.Delivery.Batch {
		return true
	}
	return BatchURL(backend)
}
