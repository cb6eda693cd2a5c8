package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
)

func Example() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := checkpoint.Open(filepath.Join(dir, "run.db"), checkpoint.Config{})
	if err != nil {
		log.Fatal(err)
	}
	fp := checkpoint.Fingerprint{"task": "9f2c", "schema": "41aa", "model": "small"}
	existed, err := s.Begin(ctx, "reviews", fp, false)
	fmt.Println("resumed:", existed, err)

	// Each agent's state is saved after every completed turn; Save returns
	// once the state is durable.
	for i, status := range []agent.Status{agent.StatusDone, agent.StatusRunning} {
		st := agent.State{
			JobID:    "reviews",
			Index:    i,
			Status:   status,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint("review ", i)}},
			Turns:    1,
		}
		if err := s.Save(ctx, st); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Later, perhaps after a crash: the same job resumes from its states.
	s, err = checkpoint.Open(filepath.Join(dir, "run.db"), checkpoint.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	existed, err = s.Begin(ctx, "reviews", fp, false)
	fmt.Println("resumed:", existed, err)
	states, err := s.Load(ctx, "reviews")
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range states {
		fmt.Println(st.Index, st.Status, st.Turns)
	}

	// An edited job is refused unless forced.
	fp["task"] = "77e0"
	_, err = s.Begin(ctx, "reviews", fp, false)
	var me *checkpoint.MismatchError
	fmt.Println(errors.As(err, &me), err)
	// Output:
	// resumed: false <nil>
	// resumed: true <nil>
	// 0 done 1
	// 1 running 1
	// true checkpoint: job "reviews" changed since its last run: task
}

// ExampleStore_Summary counts a run's agents by status, the pending ones
// too once the number of inputs is recorded, and looks into one agent.
func ExampleStore_Summary() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := checkpoint.Open(filepath.Join(dir, "run.db"), checkpoint.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Begin(ctx, "reviews", checkpoint.Fingerprint{"task": "9f2c"}, false); err != nil {
		log.Fatal(err)
	}
	if err := s.SetInputs(ctx, "reviews", 10); err != nil {
		log.Fatal(err)
	}
	for i, status := range []agent.Status{agent.StatusDone, agent.StatusFailed, agent.StatusRunning} {
		st := agent.State{JobID: "reviews", Index: i, Status: status, Turns: 1,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint("review ", i)}}}
		if err := s.Save(ctx, st); err != nil {
			log.Fatal(err)
		}
	}
	sm, err := s.Summary(ctx, "reviews")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inputs", sm.Inputs, "pending", sm.Pending(), "done", sm.ByStatus[agent.StatusDone],
		"failed", sm.ByStatus[agent.StatusFailed], "running", sm.ByStatus[agent.StatusRunning])

	// Load leaves final states' conversations out; State has them.
	states, _ := s.Load(ctx, "reviews")
	st, err := s.State(ctx, "reviews", 1)
	fmt.Println(len(states[1].Messages), len(st.Messages), st.Messages[0].Content, err)
	// Output:
	// inputs 10 pending 7 done 1 failed 1 running 1
	// 0 1 review 1 <nil>
}

// ExampleStore_AddSample records readings of a run's counters while it
// runs, and reads them back from the file opened read-only, as a report
// does.
func ExampleStore_AddSample() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.db")
	ctx := context.Background()
	s, err := checkpoint.Open(path, checkpoint.Config{})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC)
	// One reading a second; Data is the caller's JSON: counters, never
	// secrets.
	for sec, done := range []int{0, 40, 95} {
		data := json.RawMessage(fmt.Sprintf(`{"done": %d, "in_flight": 64}`, done))
		sm := checkpoint.Sample{At: start.Add(time.Duration(sec) * time.Second), Data: data}
		if err := s.AddSample(ctx, "reviews", sm); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := checkpoint.OpenReadOnly(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	samples, err := r.Samples(ctx, "reviews")
	if err != nil {
		log.Fatal(err)
	}
	for _, sm := range samples {
		fmt.Println(sm.At.Sub(start), string(sm.Data))
	}
	// Output:
	// 0s {"done":0,"in_flight":64}
	// 1s {"done":40,"in_flight":64}
	// 2s {"done":95,"in_flight":64}
}
