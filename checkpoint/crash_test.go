package checkpoint_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
	"github.com/batchagent/batchagent/llm"
)

// crashChildEnv, when set, makes the test binary run crashChild on the
// store it names instead of the tests.
const crashChildEnv = "CHECKPOINT_CRASH_CHILD"

// crashAgents is how many agents the crash child saves concurrently.
const crashAgents = 8

// crashState is the state agent idx of job jobID has after turns turns: a
// pure function, so a loaded state can be checked for tearing.
func crashState(jobID string, idx, turns int) agent.State {
	st := agent.State{
		JobID:    jobID,
		Index:    idx,
		Status:   agent.StatusRunning,
		Turns:    turns,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("agent %d", idx)}},
		Usage:    llm.Usage{PromptTokens: int64(100 * turns), CompletionTokens: int64(turns)},
	}
	for i := range turns % 20 { // long enough to span pages now and then
		st.Messages = append(st.Messages, llm.Message{
			Role: llm.RoleAssistant, Content: strings.Repeat(fmt.Sprintf("turn %d of agent %d. ", turns, idx), 10*i+1),
		})
	}
	st.Output = json.RawMessage(fmt.Sprintf(`{"turns":%d}`, turns))
	return st
}

// crashChild saves the states of crashAgents agents of job $CHECKPOINT_JOB
// in a loop, turn after turn, and prints "idx turns" once each Save has
// returned, until it is killed, its stdin closes or a minute has passed.
func crashChild(path string) int {
	s, err := checkpoint.Open(path, checkpoint.Config{MaxBatch: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	jobID := os.Getenv("CHECKPOINT_JOB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { // the parent has gone: stop
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for idx := range crashAgents {
		wg.Go(func() {
			for turns := 1; ctx.Err() == nil; turns++ {
				if err := s.Save(ctx, crashState(jobID, idx, turns)); err != nil {
					return
				}
				mu.Lock()
				fmt.Printf("%d %d\n", idx, turns)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.Close()
	return 0
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	path := filepath.Join(t.TempDir(), "run.db")
	for round := range 3 {
		jobID := fmt.Sprintf("round%d", round)
		// Kill the child after a random number of acknowledged saves.
		kill := 100 + rand.IntN(1000)
		acked := runAndKill(t, path, jobID, kill)

		s, err := checkpoint.Open(path, checkpoint.Config{})
		if err != nil {
			t.Fatalf("round %d: Open after SIGKILL = %v", round, err)
		}
		got, err := s.Load(t.Context(), jobID)
		if err != nil {
			t.Fatalf("round %d: Load after SIGKILL = %v", round, err)
		}
		if len(got) > crashAgents {
			t.Errorf("round %d: Load = %d states, want at most %d", round, len(got), crashAgents)
		}
		seen := map[int]bool{}
		for _, st := range got {
			seen[st.Index] = true
			// Every loaded state is one that was saved, whole.
			if diff := cmp.Diff(crashState(jobID, st.Index, st.Turns), st); diff != "" {
				t.Errorf("round %d: agent %d turns %d is not a saved state (-want +got):\n%s", round, st.Index, st.Turns, diff)
			}
			// Every acknowledged save survived.
			if st.Turns < acked[st.Index] {
				t.Errorf("round %d: agent %d loaded at turn %d, but turn %d was acknowledged", round, st.Index, st.Turns, acked[st.Index])
			}
		}
		for idx, turns := range acked {
			if !seen[idx] {
				t.Errorf("round %d: agent %d missing, but turn %d was acknowledged", round, idx, turns)
			}
		}
		t.Logf("round %d: killed after %d acks; loaded %d agents", round, kill, len(got))
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close = %v", round, err)
		}
	}
}

// runAndKill runs the crash child on path for jobID, SIGKILLs it once it has
// acknowledged n saves, and returns the last acknowledged turns by agent.
func runAndKill(t *testing.T, path, jobID string, n int) map[int]int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, "CHECKPOINT_JOB="+jobID)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start crash child: %v", err)
	}
	acked := map[int]int{}
	sc := bufio.NewScanner(stdout)
	for i := 0; i < n && sc.Scan(); i++ {
		var idx, turns int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &idx, &turns); err != nil {
			t.Fatalf("crash child wrote %q: %v", sc.Text(), err)
		}
		acked[idx] = max(acked[idx], turns)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL crash child: %v", err)
	}
	// Acknowledgements written before the kill still count.
	for sc.Scan() {
		var idx, turns int
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &idx, &turns); err == nil {
			acked[idx] = max(acked[idx], turns)
		}
	}
	err = cmd.Wait()
	if len(acked) == 0 {
		t.Fatalf("crash child acknowledged nothing: %v\n%s", err, stderr.String())
	}
	return acked
}
