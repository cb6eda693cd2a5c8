package batchapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batchagent/batchagent/internal/oaiwire"
)

// runner runs one batch; the Server owns it (started by startBatch,
// stopped by Stop).
type runner struct {
	s          *Server
	id         string
	cancelOnce sync.Once
	cancelled  chan struct{} // closed when the batch is cancelled
	started    time.Time     // when startBatch started it: Config.Hold's origin
}

func (r *runner) requestCancel() { r.cancelOnce.Do(func() { close(r.cancelled) }) }

// startBatch starts the runner of batch id, unless it runs already. It
// returns false when the server is shutting down.
func (s *Server) startBatch(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	if _, ok := s.runners[id]; ok {
		return true
	}
	r := &runner{s: s, id: id, cancelled: make(chan struct{}), started: time.Now()}
	s.runners[id] = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := r.run(s.ctx); err != nil && s.ctx.Err() == nil {
			s.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "batch stopped", slog.String("batch", id), slog.String("err", err.Error()))
		}
		s.mu.Lock()
		delete(s.runners, id)
		s.mu.Unlock()
	}()
	return true
}

// run takes the batch from its recorded state to a final one. It returns
// early, leaving the state for a later server, when ctx ends.
func (r *runner) run(ctx context.Context) error {
	st := r.s.cfg.Store
	b, err := st.getBatch(ctx, r.id)
	if err != nil {
		return err
	}
	if b.Status == "cancelling" {
		r.requestCancel()
	}
	// The lines run as the batch's owner's (see OwnerFrom).
	var owner string
	if err := st.db.QueryRowContext(ctx, `SELECT owner FROM batches WHERE id = ?`, r.id).Scan(&owner); err != nil {
		return fmt.Errorf("read the owner of batch %s: %w", r.id, err)
	}
	ctx = WithOwner(ctx, owner)
	deadline := time.Now().Add(r.s.cfg.Window)
	if b.ExpiresAt != nil {
		deadline = time.Unix(*b.ExpiresAt, 0)
	}
	expCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	if b.Status == "validating" {
		total, model, errs, err := r.validate(expCtx, b.InputFileID, b.Endpoint)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && expCtx.Err() != nil {
			// The window ended while validating: nothing ran.
			return r.finalize(ctx, b.InputFileID, "expired")
		}
		if err != nil {
			r.s.cfg.Logger.LogAttrs(ctx, slog.LevelError, "batch validation failed", slog.String("batch", r.id), slog.Any("err", err))
			errs = []batchError{{Code: "internal_error", Message: "the server could not read the input file; see its log"}}
		}
		b, err = st.updateBatch(ctx, r.id, func(b *batchObject) bool {
			if len(errs) > 0 {
				b.Status, b.FailedAt = "failed", now()
				b.Errors = &batchErrors{Object: "list", Data: errs}
				return true
			}
			b.RequestCounts.Total = int64(total)
			b.Model = model
			b.InProgressAt = now()
			if b.Status == "validating" {
				b.Status = "in_progress"
			}
			return true
		})
		if err != nil || b.Status == "failed" {
			return err
		}
	}
	if b.Status == "in_progress" || b.Status == "cancelling" {
		if err := r.execute(expCtx, b.InputFileID); err != nil && ctx.Err() == nil && expCtx.Err() == nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	final := "completed"
	select {
	case <-r.cancelled:
		final = "cancelled"
	default:
		if expCtx.Err() != nil {
			final = "expired"
		}
	}
	if final == "completed" && b.Status != "finalizing" {
		// Config.Hold: a batch done early stays in_progress.
		if wait := time.Until(r.started.Add(r.s.cfg.Hold)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-r.cancelled:
				final = "cancelled"
			case <-expCtx.Done():
				final = "expired"
			}
			t.Stop()
		}
	}
	if b.Status == "finalizing" {
		final = "completed"
	}
	if final == "completed" {
		if _, err := st.updateBatch(ctx, r.id, func(b *batchObject) bool {
			if b.Status == "finalizing" {
				return false
			}
			if b.Status == "cancelling" {
				final = "cancelled"
				return false
			}
			b.Status, b.FinalizingAt = "finalizing", now()
			return true
		}); err != nil {
			return err
		}
	}
	return r.finalize(ctx, b.InputFileID, final)
}

// lineScanner returns a scanner of the input file's lines, each at most
// MaxBodyBytes plus room for the line's envelope.
func (r *runner) lineScanner(f *os.File) *bufio.Scanner {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), int(r.s.cfg.MaxBodyBytes)+64<<10)
	return sc
}

// inputLine is one line of a batch's input file.
type inputLine struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// maxBatchErrors caps the errors a failed batch lists.
const maxBatchErrors = 1000

// validate reads the input file and returns its number of lines (blank
// lines are skipped), the model of its first line and what is wrong with
// it, line by line; each line's url must be endpoint.
func (r *runner) validate(ctx context.Context, fileID, endpoint string) (int, string, []batchError, error) {
	f, err := r.s.cfg.Store.openFile(fileID)
	if err != nil {
		return 0, "", []batchError{{Code: "file_not_found", Message: fmt.Sprintf("the input file %s cannot be read", fileID)}}, nil
	}
	model := ""
	defer f.Close()
	var errs []batchError
	add := func(line int, code, param, msg string) {
		if len(errs) >= maxBatchErrors {
			return
		}
		e := batchError{Code: code, Message: msg}
		if line > 0 {
			e.Line = &line
		}
		if param != "" {
			e.Param = &param
		}
		errs = append(errs, e)
	}
	seen := map[string]int{}
	total := 0
	sc := r.lineScanner(f)
	n := 0
	for sc.Scan() {
		n++
		if n%1000 == 0 && ctx.Err() != nil {
			return 0, "", nil, ctx.Err()
		}
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		total++
		if total > r.s.cfg.MaxLines {
			add(n, "too_many_requests", "", fmt.Sprintf("the input file has more than %d requests", r.s.cfg.MaxLines))
			break
		}
		var in inputLine
		if err := json.Unmarshal(raw, &in); err != nil {
			add(n, "invalid_json_line", "", "this line is not valid JSON: "+err.Error())
			continue
		}
		// A fault inside the body fails that line alone, answered 400 when
		// it runs; one in the envelope leaves it without a sure custom_id.
		if je := oaiwire.CheckJSON(raw); je != nil && !je.Within("body") {
			add(n, "invalid_json_line", je.Param(), "this line: "+je.Error())
			continue
		}
		switch {
		case in.CustomID == nil || *in.CustomID == "":
			add(n, "missing_custom_id", "custom_id", "this line has no custom_id")
		case seen[*in.CustomID] > 0:
			add(n, "duplicate_custom_id", "custom_id", fmt.Sprintf("the custom_id %q is a duplicate of line %d: custom_id must be unique in a batch", clip(*in.CustomID), seen[*in.CustomID]))
		default:
			seen[*in.CustomID] = n
		}
		if in.Method != http.MethodPost {
			add(n, "invalid_method", "method", fmt.Sprintf("method %q is not supported (only POST)", clip(in.Method)))
		}
		if in.URL != endpoint {
			add(n, "invalid_url", "url", fmt.Sprintf("url %q does not match the batch's endpoint %s", clip(in.URL), endpoint))
		}
		if b := bytes.TrimSpace(in.Body); len(b) == 0 || b[0] != '{' {
			add(n, "invalid_body", "body", "body must be a JSON object")
		} else if model == "" {
			var body struct {
				Model string `json:"model"`
			}
			json.Unmarshal(b, &body)
			model = body.Model
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			add(n+1, "line_too_long", "", fmt.Sprintf("this line is longer than %d bytes", r.s.cfg.MaxBodyBytes))
		} else {
			return 0, "", nil, fmt.Errorf("read input file %s: %w", fileID, err)
		}
	}
	if total == 0 && len(errs) == 0 {
		add(0, "empty_file", "", "the input file has no requests")
	}
	return total, model, errs, nil
}

// execute runs the lines not yet recorded, at most BatchConcurrency (of all
// batches together) at once, reading the file as it goes. It stops
// admitting lines when the batch is cancelled (letting those in flight
// finish) or ctx ends (which stops those in flight, unrecorded).
func (r *runner) execute(ctx context.Context, fileID string) error {
	st := r.s.cfg.Store
	done, err := st.doneLines(ctx, r.id)
	if err != nil {
		return err
	}
	f, err := st.openFile(fileID)
	if err != nil {
		return fmt.Errorf("open input file %s: %w", fileID, err)
	}
	defer f.Close()
	sem := r.s.sem
	var wg sync.WaitGroup
	defer wg.Wait()
	sc := r.lineScanner(f)
	n := 0
admit:
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || done[n] {
			continue
		}
		select {
		case <-r.cancelled:
			break admit
		case <-ctx.Done():
			break admit
		case sem <- struct{}{}:
		}
		select {
		case <-r.cancelled:
			<-sem
			break admit
		default:
		}
		line, raw := n, bytes.Clone(raw)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := r.runLine(ctx, line, raw); err != nil {
				r.s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "batch line not recorded", slog.String("batch", r.id), slog.Int("line", line), slog.String("err", err.Error()))
			}
		}()
	}
	return sc.Err()
}

// outputLine is a line of a batch's output or error file.
type outputLine struct {
	ID       string        `json:"id"`
	CustomID string        `json:"custom_id"`
	Response *lineResponse `json:"response"`
	Error    *lineError    `json:"error"`
}

type lineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type lineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// clip shortens a client's value quoted in an error message, so that a
// batch's errors stay small however long the values in its lines.
func clip(v string) string {
	const most = 64
	if len(v) <= most {
		return v
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…"
}

// The pauses between the tries of a batch line refused for the moment.
const (
	lineRetryBase = time.Second
	lineRetryMax  = 30 * time.Second
)

// retryableStatus reports whether a line's status is a momentary refusal:
// rate limited, bad gateway, unavailable, timed out.
func retryableStatus(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// runLine runs one input line and records its answer. A line that fails
// because ctx ended is not recorded: it runs again on resume, or is
// reported expired.
func (r *runner) runLine(ctx context.Context, line int, raw []byte) error {
	var in inputLine
	if err := json.Unmarshal(raw, &in); err != nil || in.CustomID == nil {
		return fmt.Errorf("line %d changed since validation", line)
	}
	// A momentary refusal (rate limit, overload, backend down or slow) is
	// asked again with a growing pause until the completion window ends:
	// a batch has the window to finish, not one request's timeout.
	var (
		status int
		body   json.RawMessage
		reqID  string
		err    error
	)
	for pause := lineRetryBase; ; pause = min(2*pause, lineRetryMax) {
		reqID = newID("req_")
		status, body, err = r.s.cfg.Exec(withEndpoint(ctx, in.URL), reqID, in.Body)
		if !retryableStatus(status) || ctx.Err() != nil || errors.Is(err, ErrFinal) {
			break
		}
		if err != nil {
			r.s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "batch line refused for now", slog.String("batch", r.id), slog.Int("line", line),
				slog.String("request_id", reqID), slog.Int("status", status), slog.String("err", err.Error()))
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	ok := status >= 200 && status < 300
	if !ok && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		// The whole cause, which the line's answer leaves out.
		r.s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "batch line failed", slog.String("batch", r.id), slog.Int("line", line),
			slog.String("request_id", reqID), slog.Int("status", status), slog.String("err", err.Error()))
	}
	out, _ := json.Marshal(outputLine{
		ID: newID("batch_req_"), CustomID: *in.CustomID,
		Response: &lineResponse{StatusCode: status, RequestID: reqID, Body: body},
	})
	return r.s.cfg.Store.recordLine(context.WithoutCancel(ctx), r.id, line, !ok, out)
}

// finalize writes the output and error files from the recorded lines, in
// input order (lines never run are reported in the error file with
// batch_expired or batch_cancelled), and ends the batch with status final.
func (r *runner) finalize(ctx context.Context, fileID, final string) error {
	st := r.s.cfg.Store
	in, err := st.openFile(fileID)
	if err != nil {
		return fmt.Errorf("open input file %s: %w", fileID, err)
	}
	defer in.Close()
	// The files' IDs derive from the batch's: a finalize run again after a
	// crash replaces its files rather than leaving others behind.
	outID, errID := derivedID(r.id, "output"), derivedID(r.id, "errors")
	outF, err := os.Create(st.filePath(outID))
	if err != nil {
		return err
	}
	defer outF.Close()
	errF, err := os.Create(st.filePath(errID))
	if err != nil {
		return err
	}
	defer errF.Close()
	outW, errW := bufio.NewWriter(outF), bufio.NewWriter(errF)
	var outN, errN int64

	rows, err := st.db.QueryContext(ctx, `SELECT line, failed, data FROM lines WHERE batch_id = ? ORDER BY line`, r.id)
	if err != nil {
		return fmt.Errorf("read lines of batch %s: %w", r.id, err)
	}
	defer rows.Close()
	next := func() (int, bool, string, error) {
		if !rows.Next() {
			return 0, false, "", rows.Err()
		}
		var line int
		var failed bool
		var data string
		err := rows.Scan(&line, &failed, &data)
		return line, failed, data, err
	}
	recLine, recFailed, recData, err := next()
	if err != nil {
		return err
	}
	code, msg := "batch_expired", "This request could not be executed before the completion window expired."
	if final == "cancelled" {
		code, msg = "batch_cancelled", "This request was not executed: the batch was cancelled."
	} else if final == "completed" {
		code, msg = "batch_failed", "This request was not executed."
	}
	var usage batchUsage
	sc := r.lineScanner(in)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if recLine == n {
			if !recFailed {
				usage.add(recData)
			}
			if recFailed {
				errW.WriteString(recData)
				errW.WriteByte('\n')
				errN++
			} else {
				outW.WriteString(recData)
				outW.WriteByte('\n')
				outN++
			}
			if recLine, recFailed, recData, err = next(); err != nil {
				return err
			}
			continue
		}
		var il inputLine
		json.Unmarshal(raw, &il)
		id := ""
		if il.CustomID != nil {
			id = *il.CustomID
		}
		b, _ := json.Marshal(outputLine{ID: newID("batch_req_"), CustomID: id, Error: &lineError{Code: code, Message: msg}})
		errW.Write(b)
		errW.WriteByte('\n')
		errN++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read input file %s: %w", fileID, err)
	}
	rows.Close()
	for _, w := range []*bufio.Writer{outW, errW} {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for _, f := range []*os.File{outF, errF} {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	var outFile, errFile *string
	for _, o := range []struct {
		id   string
		n    int64
		f    *os.File
		into **string
		name string
	}{{outID, outN, outF, &outFile, "batch_output.jsonl"}, {errID, errN, errF, &errFile, "batch_errors.jsonl"}} {
		if o.n == 0 {
			os.Remove(st.filePath(o.id))
			continue
		}
		fi, err := o.f.Stat()
		if err != nil {
			return err
		}
		obj := fileObject{ID: o.id, Object: "file", Bytes: fi.Size(), CreatedAt: time.Now().Unix(), Filename: r.id + "_" + o.name, Purpose: "batch_output", Status: "processed"}
		raw, _ := json.Marshal(obj)
		// The batch's owner owns its output and error files.
		if _, err := st.db.ExecContext(ctx, `INSERT OR REPLACE INTO files (id, obj, owner) VALUES (?, ?, (SELECT owner FROM batches WHERE id = ?))`, o.id, string(raw), r.id); err != nil {
			return fmt.Errorf("record file %s: %w", o.id, err)
		}
		id := o.id
		*o.into = &id
	}
	_, err = st.updateBatch(ctx, r.id, func(b *batchObject) bool {
		b.Status, b.OutputFileID, b.ErrorFileID, b.Usage = final, outFile, errFile, &usage
		switch final {
		case "completed":
			b.CompletedAt = now()
		case "cancelled":
			b.CancelledAt = now()
		case "expired":
			b.ExpiredAt = now()
		}
		return true
	})
	return err
}

// derivedID returns the ID of a batch's output or error file.
func derivedID(batchID, kind string) string {
	sum := sha256.Sum256([]byte(batchID + "/" + kind))
	return "file-" + hex.EncodeToString(sum[:12])
}

// add adds the usage of a recorded output line's body.
func (u *batchUsage) add(line string) {
	var l struct {
		Response struct {
			Body struct {
				Usage *struct {
					PromptTokens        int64 `json:"prompt_tokens"`
					CompletionTokens    int64 `json:"completion_tokens"`
					TotalTokens         int64 `json:"total_tokens"`
					PromptTokensDetails struct {
						CachedTokens int64 `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			} `json:"body"`
		} `json:"response"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Response.Body.Usage == nil {
		return
	}
	w := l.Response.Body.Usage
	u.InputTokens += w.PromptTokens
	u.InputTokensDetails.CachedTokens += w.PromptTokensDetails.CachedTokens
	u.OutputTokens += w.CompletionTokens
	u.TotalTokens += w.TotalTokens
}
