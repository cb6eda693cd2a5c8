package report_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/report"
	"github.com/batchagent/batchagent/tool"
)

// TestSamplerSplitsAgentsByState: the sampler records the engine's gauges
// of agents in a model call, in a tool and waiting for a slot, and its
// tool errors; the report's agents chart ends each series at the last
// sample's value, the rest counted as other, and the tools chart has a
// bar of errors.
func TestSamplerSplitsAgentsByState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stats := func() batchagent.Stats {
			return batchagent.Stats{Started: 20, Done: 5, OK: 5, AgentsCalling: 4, AgentsInTools: 6, AgentsWaiting: 3, ToolErrors: 7,
				Tools: []tool.Stats{{Name: "lookup", Requested: 9, Executed: 9, Errors: 7}}}
		}
		s, err := report.NewSampler(report.SamplerConfig{Stats: stats, Inputs: 20, Info: report.Info{Job: "j"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1) // Run's error, sent once
		go func() { errc <- s.Run(ctx) }()
		time.Sleep(1500 * time.Millisecond)
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		smp := s.Samples()
		last := smp[len(smp)-1]
		if last.Active != 15 || last.AgentsCalling != 4 || last.AgentsInTools != 6 || last.AgentsWaitingForSlot != 3 || last.AgentsOther() != 2 || last.ToolErrors != 7 {
			t.Errorf("last sample = %+v (other %d), want 15 active: 4 calling, 6 in tools, 3 waiting, 2 other; 7 tool errors", last, last.AgentsOther())
		}
		d := s.Data()
		tt := d.Totals
		if tt.Running != 15 || tt.AgentsCalling != 4 || tt.AgentsInTools != 6 || tt.AgentsWaitingForSlot != 3 || tt.AgentsOther() != 2 || tt.ToolErrors != 7 || d.ToolErrors() != 7 {
			t.Errorf("Totals = %+v (other %d, ToolErrors() %d), want 15 running: 4, 6, 3, 2 other; 7 tool errors", tt, tt.AgentsOther(), d.ToolErrors())
		}
		doc, _ := render(t, d)
		agents := chartOf(t, doc, "agents")
		for series, want := range map[string]string{"calling": "4", "tools": "6", "waiting": "3", "other": "2"} {
			lines := find(agents, byAttr("data-series", series))
			if len(lines) != 1 || attr(lines[0], "data-last") != want {
				t.Errorf("agents chart, series %q: want one line ending at %s", series, want)
			}
		}
		if got := caption(t, doc, "agents"); !strings.Contains(got, "4 agents in a model call, 6 in a tool, 3 waiting for a slot") {
			t.Errorf("agents caption = %q, want the peaks of each state", got)
		}
		bars := find(chartOf(t, doc, "tools"), byAttr("data-stat", "errors"))
		if len(bars) != 1 || attr(bars[0], "data-value") != "7" {
			t.Errorf("tools chart: want one errors bar of 7")
		}
		if got := caption(t, doc, "tools"); !strings.Contains(got, "7 returned an error") {
			t.Errorf("tools caption = %q, want it to count the 7 errors", got)
		}
	})
}

// TestQueueAndTTFTCharts: the queue wait has its own distribution, per
// turn, and the time to first token's says it leaves the slot wait out.
func TestQueueAndTTFTCharts(t *testing.T) {
	t.Parallel()
	d := sampleData(10)
	var waited int
	for i := range d.Agents {
		for j := range d.Agents[i].Spans {
			d.Agents[i].Spans[j].Queue = time.Duration(i) * 100 * time.Millisecond
			if i > 0 {
				waited++
			}
		}
	}
	doc, _ := render(t, d)
	var n int
	for _, b := range find(chartOf(t, doc, "queue"), byAttr("data-value", "")) {
		v, err := strconv.Atoi(attr(b, "data-value"))
		if err != nil {
			t.Fatalf("queue bar data-value: %v", err)
		}
		n += v
	}
	if n != waited {
		t.Errorf("queue chart counts %d turns, want %d (those that waited)", n, waited)
	}
	if got, want := caption(t, doc, "queue"), fmt.Sprintf("%d turns that waited for a slot", waited); !strings.HasPrefix(got, want) {
		t.Errorf("queue caption = %q, want it to start with %q", got, want)
	}
	if got := caption(t, doc, "ttft"); !strings.Contains(got, "from the request's sending") {
		t.Errorf("ttft caption = %q, want it to say TTFT runs from the request's sending", got)
	}
}
