package admission_test

import (
	"fmt"

	"github.com/batchagent/batchagent/admission"
	"github.com/batchagent/batchagent/backend/openai"
)

// A vLLM server reports its queue, so the gate starts slow and holds
// admission back while the queue is long; the limit adapts up to the
// flavor's declared default, 64, unless MaxInflight sets another.
func ExampleConfig_Gate() {
	m, err := openai.New(openai.Config{Flavor: openai.FlavorVLLM, Model: "qwen"})
	if err != nil {
		panic(err)
	}
	c := admission.Config{RateLimit: admission.RateLimit{RPM: 600}}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	g, err := c.Gate(m, "qwen")
	if err != nil {
		panic(err)
	}
	fmt.Println("declared:", g.Config.Declared, "slow start:", g.Config.SlowStart, "backpressure:", g.Config.Probe != nil)
	fmt.Println("rpm:", g.Config.RPM, "policy:", g.Config.Policy, "gated:", g.Gated, "start window:", g.Config.StartWindow)
	// Output:
	// declared: 64 slow start: true backpressure: true
	// rpm: 600 policy: turns gated: true start window: 10s
}
