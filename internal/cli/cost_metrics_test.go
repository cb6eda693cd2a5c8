package cli_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batchagent/batchagent/backend/sim"
	"github.com/batchagent/batchagent/backend/sim/simhttp"
	"github.com/batchagent/batchagent/internal/cli"
)

// TestRunCostMetrics scrapes --metrics-addr of a run of 4 inputs whose
// last 2 model calls wait at the HTTP simulator: the cost metric is the
// sum of the 2 finished lines' costs and the projection twice it. Once
// all 4 are done (the reduce step's call waits, so the run goes on), the
// cost metric is the sum of the 4 lines' costs and the projection equals
// it.
func TestRunCostMetrics(t *testing.T) {
	var (
		mu     sync.Mutex // protects passed
		passed []int      // the inputs whose calls went through at once
	)
	releaseMap, releaseReduce := make(chan struct{}), make(chan struct{})
	held := make(chan struct{}, 4)     // map calls held
	reducing := make(chan struct{}, 1) // the reduce call arrived
	say := regexp.MustCompile(`Say (\d+)`)
	addr, _ := startWrappedSimServer(t, simhttp.Config{Model: sim.Config{Seed: 3}, MaxSeqs: 8}, func(srv http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/chat/completions" {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				wait := releaseMap
				if bytes.Contains(body, []byte("Sum up")) {
					reducing <- struct{}{}
					wait = releaseReduce
				} else if m := say.FindSubmatch(body); m != nil {
					mu.Lock()
					if len(passed) < 2 {
						id, _ := strconv.Atoi(string(m[1]))
						passed = append(passed, id)
						wait = nil
					}
					mu.Unlock()
					if wait != nil {
						held <- struct{}{}
					}
				}
				if wait != nil {
					select {
					case <-wait:
					case <-r.Context().Done():
						return
					}
				}
			}
			srv.ServeHTTP(w, r)
		})
	})
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", `backend: "sim+http://`+addr+`"
task: "Say {id}"
pricing: {input: 3, cached_input: 1, output: 15}
limits: {max_inflight: 8}
reduce:
  task: "Sum up {outputs}"
`)
	in := writeFile(t, dir, "in.jsonl", "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n")
	out := filepath.Join(dir, "out.jsonl")
	var stderr lockedBuffer
	done := make(chan int, 1) // the run's exit code
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		done <- cli.Main(t.Context(), []string{"run", job, "--inputs", in, "--out", out, "--no-state", "--metrics-addr", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	defer func() { // on failure too: the run ends before the test does
		select {
		case <-releaseMap:
		default:
			close(releaseMap)
		}
		select {
		case <-releaseReduce:
		default:
			close(releaseReduce)
		}
		<-ended
	}()
	for range 2 {
		select {
		case <-held:
		case code := <-done:
			t.Fatalf("run ended early: exit %d\n%s", code, stderr.String())
		}
	}
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr does not say where the metrics are:\n%s", stderr.String())
	}
	url := m[1]
	midCost, midProjected := scrapeCostWhenDone(t, url, 2)

	close(releaseMap)
	select {
	case <-reducing: // every result is written before the reduce step
	case code := <-done:
		t.Fatalf("run ended before its reduce step: exit %d\n%s", code, stderr.String())
	}
	endCost, endProjected := scrapeCostWhenDone(t, url, 4)
	close(releaseReduce)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := readCostLines(t, string(data))
	if len(lines) != 4 {
		t.Fatalf("%d result lines, want 4:\n%s", len(lines), data)
	}
	var sumFirst, sumAll float64
	for _, l := range lines {
		if l.Cost == nil {
			t.Fatalf("line %d has no cost", l.Index)
		}
		sumAll += *l.Cost
		mu.Lock()
		for _, id := range passed {
			if id == l.Index {
				sumFirst += *l.Cost
			}
		}
		mu.Unlock()
	}
	if sumFirst == 0 || !near(midCost, sumFirst) || !near(midProjected, 2*sumFirst) {
		t.Errorf("mid-run: cost %v, projected %v; want the 2 done lines' %v and twice it (4 inputs)", midCost, midProjected, sumFirst)
	}
	if !near(endCost, sumAll) || !near(endProjected, endCost) {
		t.Errorf("at the end: cost %v, projected %v; want both the 4 lines' %v", endCost, endProjected, sumAll)
	}
}

// scrapeCostWhenDone scrapes url until n agents are done and returns the
// cost metrics then.
func scrapeCostWhenDone(t *testing.T, url string, n float64) (cost, projected float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // the results land between scrapes
	defer tick.Stop()
	for {
		fams := scrapeMetrics(t, url)
		var doneN float64
		if f := fams["batchagent_agents_done_total"]; f != nil {
			for _, m := range f.GetMetric() {
				doneN += m.GetCounter().GetValue()
			}
		}
		if doneN >= n {
			c, p := fams["batchagent_cost_dollars"], fams["batchagent_cost_projected_dollars"]
			if c == nil || p == nil || len(c.GetMetric()) != 1 || len(p.GetMetric()) != 1 {
				t.Fatalf("%v done: cost metrics %v, %v; want one series each", doneN, c, p)
			}
			if doneN != n {
				t.Fatalf("%v agents done, want %v", doneN, n)
			}
			if lbl := c.GetMetric()[0].GetLabel(); len(lbl) != 1 || lbl[0].GetName() != "job" || lbl[0].GetValue() != "job" {
				t.Errorf("cost labels %v, want job=\"job\"", lbl)
			}
			return c.GetMetric()[0].GetGauge().GetValue(), p.GetMetric()[0].GetGauge().GetValue()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v agents done after 30s, want %v", doneN, n)
		}
		<-tick.C
	}
}
