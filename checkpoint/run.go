package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/llm"
)

// Fingerprint is a run's identity: named parts (such as "task", "system",
// "schema", "tools", "model" and "backend") mapped to their hashes, as
// [Digest] makes them: the file keeps them as given, so a part must not
// hold a secret such as a backend URL with a key in its query. Two runs are
// the same job when their fingerprints are equal.
type Fingerprint map[string]string

// BackendPart is the name of the [Fingerprint] part that says where the
// job's model is served (the digest of a backend URL), not what the job
// asks of it: a forced [Store.Begin] that changes only this part keeps the
// job's states, which the same job made.
const BackendPart = "backend"

// Digest returns the hash a [Fingerprint] part holds for value: the first
// 12 bytes of its SHA-256, in hex.
func Digest(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:12])
}

// isDigest reports whether s reads as a [Digest].
func isDigest(s string) bool {
	if len(s) != 24 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

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
// task`.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("checkpoint: job %q changed since its last run: %s", e.JobID, strings.Join(e.Changed, ", "))
}

// Begin records the run of jobID with fingerprint fp, or checks it against
// the stored run: a different fingerprint is refused with a
// [*MismatchError] unless force is set, in which case the stored fingerprint
// is replaced; when a part other than [BackendPart] changed, the job's
// stored states are discarded too, in the same transaction: they were made
// by another job, and resuming from them would mix two jobs' results.
// [Store.Load], [Store.State] and [Store.Summary] no longer see them (the
// job's agents count as pending), nor its forgotten marks
// ([Store.Forget]); its samples stay. A forced Begin of an unchanged job,
// or of one whose backend alone changed, keeps its states. Begin a run
// before saving its states:
// a save of the job committed concurrently with a forced Begin may land
// on either side of it. It reports whether the run already existed.
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
		changed := old.changed(fp)
		if len(changed) > 0 && !force {
			return true, &MismatchError{JobID: jobID, Changed: changed}
		}
		if slices.ContainsFunc(changed, func(part string) bool { return part != BackendPart }) {
			if err := discardStates(ctx, tx, jobID); err != nil {
				return true, fmt.Errorf("checkpoint: begin job %q: discard the old job's states: %w", jobID, err)
			}
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

// discardStates deletes every state of jobID, in progress or final, and
// its forgotten marks, in tx.
func discardStates(ctx context.Context, tx *sql.Tx, jobID string) error {
	for _, q := range []string{
		`DELETE FROM running WHERE job_id = ?`,
		`DELETE FROM finished WHERE job_id = ?`,
		`DELETE FROM forgotten WHERE job_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, jobID); err != nil {
			return err
		}
	}
	return nil
}

// SetInputs records that jobID has n inputs, so that [Store.Summary] can
// count those without a state yet as pending. The job must have been begun
// ([Store.Begin]); n < 0 records the count as unknown.
func (s *Store) SetInputs(ctx context.Context, jobID string, n int) error {
	if s.isClosed() {
		return ErrClosed
	}
	var v sql.NullInt64
	if n >= 0 {
		v = sql.NullInt64{Int64: int64(n), Valid: true}
	}
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET inputs = ? WHERE job_id = ?`, v, jobID)
	if err == nil {
		var rows int64
		if rows, err = res.RowsAffected(); err == nil && rows == 0 {
			err = ErrUnknownJob
		}
	}
	if err != nil {
		return fmt.Errorf("checkpoint: set inputs of job %q: %w", jobID, err)
	}
	return nil
}

// Load returns the latest stored state of every agent of jobID, ordered by
// index; none for a job the store does not know. It sees every state whose
// Save has returned nil.
//
// Final states (done or failed) come without their conversation: Messages
// is nil. Resuming needs only their results and counters, and in a large
// run the conversations are most of the file (10 000 agents with 100 KB of
// tool results each: 1 GB of heap for Load with them). [Store.State]
// returns one agent's state in full.
func (s *Store) Load(ctx context.Context, jobID string) ([]agent.State, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var cut []byte
	latest, _, err := scanLatest(ctx, s.db, jobID, func(data []byte, final bool) (int, agent.State, error) {
		if final {
			st, err := decodeFinal(data, &cut)
			return st.Index, st, err
		}
		var st agent.State
		err := unmarshalState(data, &st)
		return st.Index, st, err
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load job %q: %w", jobID, err)
	}
	states := make([]agent.State, 0, len(latest))
	for _, v := range latest {
		states = append(states, v.val)
	}
	slices.SortFunc(states, func(a, b agent.State) int { return cmp.Compare(a.Index, b.Index) })
	return states, nil
}

// State returns the latest stored state of agent index of jobID in full,
// conversation included, or an error wrapping [ErrNoState]. It reads
// through the whole job's states (skipping conversations), so it is meant
// for looking into one agent, not for reading many.
func (s *Store) State(ctx context.Context, jobID string, index int) (agent.State, error) {
	if s.isClosed() {
		return agent.State{}, ErrClosed
	}
	var cut []byte
	latest, _, err := scanLatest(ctx, s.db, jobID, func(data []byte, _ bool) (int, *agent.State, error) {
		var head struct {
			Index int `json:"index"`
		}
		if err := json.Unmarshal(cutMessages(data, &cut), &head); err != nil || head.Index != index {
			return head.Index, nil, err
		}
		st := new(agent.State)
		err := unmarshalState(data, st)
		return st.Index, st, err
	})
	if err != nil {
		return agent.State{}, fmt.Errorf("checkpoint: state of job %q agent %d: %w", jobID, index, err)
	}
	v, ok := latest[index]
	if !ok {
		return agent.State{}, fmt.Errorf("checkpoint: state of job %q agent %d: %w", jobID, index, ErrNoState)
	}
	return *v.val, nil
}

// versioned is a decoded stored state and its sequence number.
type versioned[T any] struct {
	seq int64
	val T
}

// span is when the first and the latest of a job's stored states were
// saved, Unix ns; both zero when there are none.
type span struct{ first, last int64 }

func (sp *span) add(t int64) {
	if sp.first == 0 || t < sp.first {
		sp.first = t
	}
	sp.last = max(sp.last, t)
}

// maxSegment bounds the decoded size of a segment: a larger one is damaged.
const maxSegment = 1 << 30

// scanLatest decodes the stored states of jobID with decode, which is told
// whether the state is final and returns its agent index, and keeps for
// each agent the state with the highest sequence number.
func scanLatest[T any](ctx context.Context, db *sql.DB, jobID string, decode func(data []byte, final bool) (int, T, error)) (map[int]versioned[T], span, error) {
	latest := make(map[int]versioned[T])
	var sp span
	// Read in one transaction, so that a commit landing in between cannot
	// move an agent from running to finished unseen.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, sp, err
	}
	defer tx.Rollback()
	forgotten, err := readForgotten(ctx, tx, jobID)
	if err != nil {
		return nil, sp, err
	}

	// put decodes the state numbered seq; stored, when not negative, is
	// the agent index the row was stored under.
	put := func(seq int64, data []byte, stored int) error {
		idx, v, err := decode(data, stored < 0)
		switch {
		case err != nil:
			return fmt.Errorf("state %d: %w", seq, err)
		case stored >= 0 && idx != stored:
			return fmt.Errorf("state %d: index %d stored as agent %d", seq, idx, stored)
		}
		if before, ok := forgotten[idx]; ok && seq < before {
			return nil
		}
		if old, ok := latest[idx]; !ok || seq > old.seq {
			latest[idx] = versioned[T]{seq, v}
		}
		return nil
	}

	rows, err := tx.QueryContext(ctx, `SELECT seq, n, states, updated FROM finished WHERE job_id = ? ORDER BY seq`, jobID)
	if err != nil {
		return nil, sp, err
	}
	defer rows.Close()
	var buf []byte
	for rows.Next() {
		var seq, n, updated int64
		var packed sql.RawBytes
		if err := rows.Scan(&seq, &n, &packed, &updated); err != nil {
			return nil, sp, err
		}
		sp.add(updated)
		size, err := s2.DecodedLen(packed)
		if err == nil && size > maxSegment {
			err = fmt.Errorf("%d bytes", size)
		}
		if err != nil {
			return nil, sp, fmt.Errorf("segment %d: %w", seq, err)
		}
		seg, err := s2.Decode(buf[:cap(buf)], packed)
		if err != nil {
			return nil, sp, fmt.Errorf("segment %d: %w", seq, err)
		}
		buf = seg
		lines := int64(0)
		for len(seg) > 0 {
			line, rest, ok := bytes.Cut(seg, []byte{'\n'})
			if !ok {
				return nil, sp, fmt.Errorf("segment %d: last line not terminated", seq)
			}
			if lines == n {
				return nil, sp, fmt.Errorf("segment %d: more than its %d states", seq, n)
			}
			if err := put(seq+lines, line, -1); err != nil {
				return nil, sp, err
			}
			seg = rest
			lines++
		}
		if lines != n {
			return nil, sp, fmt.Errorf("segment %d: %d states, want %d", seq, lines, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, sp, err
	}

	rows, err = tx.QueryContext(ctx, `SELECT idx, seq, state, updated FROM running WHERE job_id = ?`, jobID)
	if err != nil {
		return nil, sp, err
	}
	defer rows.Close()
	for rows.Next() {
		var idx int
		var seq, updated int64
		var data sql.RawBytes
		if err := rows.Scan(&idx, &seq, &data, &updated); err != nil {
			return nil, sp, err
		}
		sp.add(updated)
		if err := put(seq, data, idx); err != nil {
			return nil, sp, err
		}
	}
	return latest, sp, rows.Err()
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
	// Inputs is the job's number of inputs as recorded by
	// [Store.SetInputs], or -1 when it is not known.
	Inputs int
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

// Pending returns the number of inputs without a stored state (not started,
// or stopped before their first turn completed), or -1 when the number of
// inputs is not known.
func (sm Summary) Pending() int {
	if sm.Inputs < 0 {
		return -1
	}
	return max(sm.Inputs-sm.Total(), 0)
}

// Summary counts the states of jobID. It returns [ErrUnknownJob] (wrapped)
// for a job with neither a run record nor states.
func (s *Store) Summary(ctx context.Context, jobID string) (Summary, error) {
	if s.isClosed() {
		return Summary{}, ErrClosed
	}
	fail := func(err error) (Summary, error) {
		return Summary{}, fmt.Errorf("checkpoint: summary of job %q: %w", jobID, err)
	}
	var created, inputs sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT created, inputs FROM runs WHERE job_id = ?`, jobID).Scan(&created, &inputs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fail(err)
	}

	// Only the fields counted, so that the conversations are skipped.
	type counted struct {
		Index   int          `json:"index"`
		Status  agent.Status `json:"status"`
		Failure struct {
			Kind string `json:"kind"`
		} `json:"failure"`
		ErrKind    string    `json:"err_kind"` // of a state saved before Failure
		Turns      int       `json:"turns"`
		ModelCalls int       `json:"model_calls"`
		Usage      llm.Usage `json:"usage"`
	}
	var cut []byte
	latest, sp, err := scanLatest(ctx, s.db, jobID, func(data []byte, _ bool) (int, counted, error) {
		var c counted
		err := json.Unmarshal(cutMessages(data, &cut), &c)
		return c.Index, c, err
	})
	if err != nil {
		return fail(err)
	}
	if len(latest) == 0 && !created.Valid {
		return fail(ErrUnknownJob)
	}
	sm := Summary{JobID: jobID, ByStatus: map[agent.Status]int{}, ByKind: map[string]int{}, Inputs: -1}
	if inputs.Valid {
		sm.Inputs = int(inputs.Int64)
	}
	for _, v := range latest {
		c := v.val
		sm.ByStatus[c.Status]++
		if kind := cmp.Or(c.Failure.Kind, c.ErrKind); kind != "" {
			sm.ByKind[kind]++
		}
		sm.Turns += c.Turns
		sm.ModelCalls += c.ModelCalls
		sm.Usage = sm.Usage.Add(c.Usage)
	}
	switch {
	case created.Valid:
		sm.First = time.Unix(0, created.Int64)
	case sp.first != 0:
		sm.First = time.Unix(0, sp.first)
	}
	if sp.last != 0 {
		sm.Last = time.Unix(0, sp.last)
	}
	return sm, nil
}

// Jobs returns the IDs of the jobs in the store, those with a run record
// or states, sorted.
func (s *Store) Jobs(ctx context.Context) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT job_id FROM runs UNION SELECT job_id FROM running UNION SELECT job_id FROM finished ORDER BY 1`)
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

// decodeFinal decodes a final state without its conversation: a line
// the quick cut cannot take (one without messages, or with two) is
// decoded whole, its messages then dropped.
func decodeFinal(line []byte, buf *[]byte) (agent.State, error) {
	var st agent.State
	err := unmarshalState(cutMessages(line, buf), &st)
	st.Messages = nil
	return st, err
}

// cutMessages returns the state line without its messages member, cut out
// by a quick scan (strings skipped with IndexByte) into buf, so that
// decoding the rest skips the conversation: encoding/json would scan it
// twice, at 7 s per GB. A line the scan cannot read is returned as is.
func cutMessages(line []byte, buf *[]byte) []byte {
	start, end, ok := membersSpan(line, "messages")
	if !ok {
		return line
	}
	*buf = append(append((*buf)[:0], line[:start]...), line[end:]...)
	return *buf
}

// membersSpan finds the member key of the JSON object line, at its top
// level, and returns the span to cut to remove it: from the comma before
// it to the end of its value. It reports false when line does not read as
// an object with the member after another one; it does not validate line.
func membersSpan(line []byte, key string) (start, end int, ok bool) {
	depth, comma := 0, -1
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			j := stringEnd(line, i)
			if j < 0 {
				return 0, 0, false
			}
			if depth == 1 && comma >= 0 && string(line[i+1:j-1]) == key && j < len(line) && line[j] == ':' {
				if end, ok = valueEnd(line, j+1); !ok {
					return 0, 0, false
				}
				return comma, end, true
			}
			i = j - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				comma = i
			}
		}
	}
	return 0, 0, false
}

// stringEnd returns the offset just past the string that opens at line[i],
// or -1 when it is not closed.
func stringEnd(line []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(line[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0 // backslashes before the quote
		for n < j-i-1 && line[j-1-n] == '\\' {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

// valueEnd returns the offset just past the JSON value that starts at
// line[i] (no space before it: stored lines are compact), an array, an
// object or a literal such as null.
func valueEnd(line []byte, i int) (int, bool) {
	depth := 0
	for j := i; j < len(line); j++ {
		switch line[j] {
		case '"':
			k := stringEnd(line, j)
			if k < 0 {
				return 0, false
			}
			j = k - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, true // the end of a literal, at the enclosing object's end
			}
			if depth--; depth == 0 {
				return j + 1, true
			}
		case ',':
			if depth == 0 {
				return j, true
			}
		}
	}
	return 0, false
}
