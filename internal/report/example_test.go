package report_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/batchagent/batchagent/internal/report"
)

// ExampleWrite draws a run of two agents and lists the page's charts by
// their test hooks.
func ExampleWrite() {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	d := &report.Data{
		Info:   report.Info{Job: "review"},
		Start:  start,
		End:    start.Add(3 * time.Second),
		Totals: report.Totals{Inputs: 2, Done: 2, OK: 1, Failed: 1, ByKind: map[string]int64{"validation": 1}},
		Agents: []report.Agent{
			{Index: 0, Status: "done", Started: start, Total: 2 * time.Second},
			{Index: 1, Status: "failed", Kind: "validation", Started: start.Add(time.Second), Total: 2 * time.Second},
		},
	}
	var b bytes.Buffer
	if err := report.Write(&b, d); err != nil {
		fmt.Println(err)
		return
	}
	var charts []string
	for _, m := range regexp.MustCompile(`data-chart="(\w+)"`).FindAllStringSubmatch(b.String(), -1) {
		charts = append(charts, m[1])
	}
	fmt.Println(strings.Join(charts, " "))
	fmt.Println(regexp.MustCompile(`id="done" data-value="\d+"`).FindString(b.String()))
	// Output:
	// timeline throughput agents limit ttft queue latency errors tools cost
	// id="done" data-value="2"
}
