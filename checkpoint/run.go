package checkpoint

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// Fingerprint is a run's identity: named parts (such as "task", "system",
// "schema", "tools", "model" and "backend") mapped to their hashes. Two runs
// are the same job when their fingerprints are equal.
type Fingerprint map[string]string

// changed returns the names of the parts that differ between fp and other,
// a part missing from one of them included, sorted.
func (fp Fingerprint) changed(other Fingerprint) []string {
	var names []string
	for k, v := range fp {
		if w, ok := other[k]; !ok || w != v {
			names = append(names, k)
		}
	}
	for k := range other {
		if _, ok := fp[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// MismatchError says that a stored run differs from the one asked for.
type MismatchError struct {
	// JobID is the run's job.
	JobID string
	// Changed lists the names of the fingerprint parts that differ, sorted.
	Changed []string
}

// Error returns e.g. `checkpoint: job "x" changed since its last run: schema,
// task (use --force to resume anyway)`.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("checkpoint: job %q changed since its last run: %s (use --force to resume anyway)",
		e.JobID, strings.Join(e.Changed, ", "))
}

// Begin records the run of jobID with fingerprint fp, or checks it against
// the stored run: a different fingerprint is refused with a
// [*MismatchError] unless force is set, in which case the stored fingerprint
// is replaced. It reports whether the run already existed.
func (s *Store) Begin(ctx context.Context, jobID string, fp Fingerprint, force bool) (existed bool, err error) {
	if s.isClosed() {
		return false, ErrClosed
	}
	if fp == nil {
		fp = Fingerprint{}
	}
	data, err := json.Marshal(fp)
	if err != nil {
		return false, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
	}
	defer tx.Rollback()

	now := time.Now().UnixNano()
	var stored []byte
	err = tx.QueryRowContext(ctx, `SELECT fingerprint FROM runs WHERE job_id = ?`, jobID).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (job_id, fingerprint, created, updated) VALUES (?, ?, ?, ?)`,
			jobID, string(data), now, now); err != nil {
			return false, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
		}
	case err != nil:
		return false, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
	default:
		existed = true
		var old Fingerprint
		if err := json.Unmarshal(stored, &old); err != nil {
			return true, fmt.Errorf("checkpoint: begin job %q: stored fingerprint: %w", jobID, err)
		}
		if changed := old.changed(fp); len(changed) > 0 && !force {
			return true, &MismatchError{JobID: jobID, Changed: changed}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET fingerprint = ?, updated = ? WHERE job_id = ?`,
			string(data), now, jobID); err != nil {
			return true, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return existed, fmt.Errorf("checkpoint: begin job %q: %w", jobID, err)
	}
	return existed, nil
}

// Load returns the stored states of jobID, ordered by index; none for a job
// the store does not know. It sees every state whose Save has returned nil.
func (s *Store) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT state FROM states WHERE job_id = ? ORDER BY idx`, jobID)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load job %q: %w", jobID, err)
	}
	defer rows.Close()
	var states []agent.State
	for rows.Next() {
		var data sql.RawBytes
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("checkpoint: load job %q: %w", jobID, err)
		}
		var st agent.State
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("checkpoint: load job %q agent %d: %w", jobID, len(states), err)
		}
		states = append(states, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: load job %q: %w", jobID, err)
	}
	return states, nil
}

// Summary counts the states of a run.
type Summary struct {
	// JobID is the run's job.
	JobID string
	// ByStatus counts the agents by status.
	ByStatus map[agent.Status]int
	// ByKind counts the failed agents by error kind.
	ByKind map[string]int
	// Usage sums the tokens of all agents.
	Usage llm.Usage
	// Turns and ModelCalls sum the agents' completed turns and model calls.
	Turns, ModelCalls int
	// First is when the run was first begun, or, for a run never begun,
	// when its first state was saved. Last is when its latest state was
	// saved. Both are zero for a run with no states and no record.
	First, Last time.Time
}

// Total returns the number of agents with a stored state.
func (sm Summary) Total() int {
	n := 0
	for _, c := range sm.ByStatus {
		n += c
	}
	return n
}

// Summary counts the states of jobID. It returns [ErrUnknownJob] (wrapped)
// for a job with neither a run record nor states.
func (s *Store) Summary(ctx context.Context, jobID string) (Summary, error) {
	if s.isClosed() {
		return Summary{}, ErrClosed
	}
	sm := Summary{JobID: jobID, ByStatus: map[agent.Status]int{}, ByKind: map[string]int{}}
	fail := func(err error) (Summary, error) {
		return Summary{}, fmt.Errorf("checkpoint: summary of job %q: %w", jobID, err)
	}

	var created sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT created FROM runs WHERE job_id = ?`, jobID).Scan(&created)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fail(err)
	}

	var n, turns, calls, prompt, completion, cached int64
	var first, last sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(turns), 0),
		coalesce(sum(json_extract(CAST(state AS TEXT), '$.model_calls')), 0),
		coalesce(sum(json_extract(CAST(state AS TEXT), '$.usage.prompt_tokens')), 0),
		coalesce(sum(json_extract(CAST(state AS TEXT), '$.usage.completion_tokens')), 0),
		coalesce(sum(json_extract(CAST(state AS TEXT), '$.usage.cached_tokens')), 0),
		min(updated), max(updated)
		FROM states WHERE job_id = ?`, jobID).
		Scan(&n, &turns, &calls, &prompt, &completion, &cached, &first, &last)
	if err != nil {
		return fail(err)
	}
	if n == 0 && !created.Valid {
		return fail(ErrUnknownJob)
	}
	sm.Turns, sm.ModelCalls = int(turns), int(calls)
	sm.Usage = llm.Usage{PromptTokens: prompt, CompletionTokens: completion, CachedTokens: cached}
	switch {
	case created.Valid:
		sm.First = time.Unix(0, created.Int64)
	case first.Valid:
		sm.First = time.Unix(0, first.Int64)
	}
	if last.Valid {
		sm.Last = time.Unix(0, last.Int64)
	}

	rows, err := s.db.QueryContext(ctx, `SELECT status, coalesce(json_extract(CAST(state AS TEXT), '$.err_kind'), ''), count(*)
		FROM states WHERE job_id = ? GROUP BY 1, 2`, jobID)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for rows.Next() {
		var status, kind string
		var c int
		if err := rows.Scan(&status, &kind, &c); err != nil {
			return fail(err)
		}
		sm.ByStatus[agent.Status(status)] += c
		if kind != "" {
			sm.ByKind[kind] += c
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return sm, nil
}

// Jobs returns the IDs of the jobs in the store, those with a run record
// or states, sorted.
func (s *Store) Jobs(ctx context.Context) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT job_id FROM runs UNION SELECT DISTINCT job_id FROM states ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: jobs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("checkpoint: jobs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: jobs: %w", err)
	}
	return ids, nil
}
