package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

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
	// true checkpoint: job "reviews" changed since its last run: task (use --force to resume anyway)
}
