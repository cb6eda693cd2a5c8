package outfile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/checkpoint"
)

// Store is a run's checkpoint store as the engine sees it: the states a
// resumed run loaded to check the inputs and the output ([Store.Preload])
// are handed to the engine's first Load instead of being read twice, and
// the first failed save is kept for the run's error message
// ([Store.FirstSaveError]). It is safe for concurrent use. Build one with
// a literal, Store{Store: s}; the caller keeps ownership of s and closes
// it.
type Store struct {
	*checkpoint.Store // Save and SaveAsync (the engine's asynchronous path) wrapped below

	mu      sync.Mutex    // protects the fields below
	states  []agent.State // for the first Load of job, when loaded already
	job     string        // the job of states
	loaded  bool          // states holds the job's states
	saveErr error         // the first failed save
}

// Load returns the states loaded by [Store.Preload] the first time the
// job is loaded, then reads the store.
func (s *Store) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	s.mu.Lock()
	if s.loaded && jobID == s.job {
		st := s.states
		s.states, s.loaded = nil, false
		s.mu.Unlock()
		return st, nil
	}
	s.mu.Unlock()
	return s.Store.Load(ctx, jobID)
}

// Save saves st, noting a failure.
func (s *Store) Save(ctx context.Context, st agent.State) error {
	err := s.Store.Save(ctx, st)
	s.note(err)
	return err
}

// SaveAsync saves st asynchronously, noting a failure.
func (s *Store) SaveAsync(st *agent.State, done func(error)) {
	s.Store.SaveAsync(st, func(err error) {
		s.note(err)
		done(err)
	})
}

func (s *Store) note(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saveErr == nil {
		s.saveErr = err
	}
}

// FirstSaveError returns the first failed save, or nil.
func (s *Store) FirstSaveError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveErr
}

// Preload reads the job's saved states for a resumed run, from the state
// file at statePath (for messages), and keeps them for the engine's first
// Load. A state file that cannot be read (damaged pages, a state that does
// not decode) stops the run before anything is written: every input would
// otherwise fail.
func (s *Store) Preload(ctx context.Context, jobID, statePath string) ([]agent.State, error) {
	states, err := s.Store.Load(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("state file %s cannot be read: %w; nothing was run or written: repair the file, remove it, or pass another --state", statePath, err)
	}
	s.mu.Lock()
	s.states, s.job, s.loaded = states, jobID, true
	s.mu.Unlock()
	return states, nil
}

// ForgetChanged discards the saved states of the inputs in changed
// (changed since the last run, accepted with --force; see [Plan.Dropped]),
// in the store and among the states preloaded for the engine, so that
// status and export no longer report them and a later resume does not
// find them changed again.
func (s *Store) ForgetChanged(ctx context.Context, jobID string, changed map[int]bool) error {
	if len(changed) == 0 {
		return nil
	}
	indexes := slices.Sorted(maps.Keys(changed))
	if err := s.Store.Forget(ctx, jobID, indexes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded && s.job == jobID {
		s.states = slices.DeleteFunc(s.states, func(st agent.State) bool { return changed[st.Index] })
	}
	return nil
}
