package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/llm"
)

// Limits of one Message Batch, as Anthropic documents them.
const (
	// BatchMaxLines is the most requests one Message Batch may hold.
	BatchMaxLines = 100_000
	// BatchMaxBytes is the most bytes the lines of one Message Batch may
	// take: Anthropic's 256 MB request limit, less room for the
	// {"requests":[...]} envelope and its commas.
	BatchMaxBytes = 256_000_000 - 1_000_000
	// BatchWindow is the time Anthropic gives a Message Batch before its
	// unfinished requests expire.
	BatchWindow = 24 * time.Hour
)

// apiVersion is the anthropic-version header, the one the SDK sends on
// real-time calls.
const apiVersion = "2023-06-01"

// batchPath is the Message Batches endpoint under the base URL.
const batchPath = "/v1/messages/batches"

// maxJSONBody caps the bytes read of a batch endpoint's JSON answer (a
// batch object or a page of the list), and maxResultLine those of one line
// of a results file (one Messages answer).
const (
	maxJSONBody   = 16 << 20
	maxResultLine = 64 << 20
)

// customID is the form Anthropic accepts for a request's custom_id.
var customID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Batch is Anthropic's Message Batches API as a [batchmode.Provider]:
// requests go out in the body of the batch's creation (the API takes no
// files, so Upload returns "") and results come back from the batch's
// results_url as JSONL. Each line's params are exactly the Messages body
// that [Model.Generate] sends for the same request, and each answer is read
// as Generate reads one.
//
// Reading a structured answer needs to know the request's output tool
// (its name, and whether the schema was wrapped), which the results do not
// repeat: Encode remembers it by custom_id until Results yields that
// line's answer. A process that reads the results of a batch another
// process submitted should therefore Encode those lines again first
// (Encode is deterministic). For a line it did not encode, Results takes a
// call of a tool named as batchagent names its output tool ("output",
// "batchagent_pack", with ToolName's _N suffix) for the structured answer,
// unwrapped from {"value": V} when V is not an object; any other call is
// a tool call.
//
// A Batch is safe for concurrent use.
type Batch struct {
	m       *Model
	client  *http.Client // m's client, redirects to another host without the key
	apiKey  *llm.Secret
	base    *url.URL
	baseURL string // BaseURL without a trailing slash

	mu sync.Mutex // protects outputs
	// outputs holds the output tool of each encoded line that asks for
	// structured output, by custom_id, until its answer is read.
	outputs map[string]outputTool
}

// outputTool is what reading a structured answer needs of its request.
type outputTool struct {
	name    string
	wrapped bool
}

var _ batchmode.Provider = (*Batch)(nil)

// NewBatch returns a Batch for cfg, validated as [New] validates it (Mode
// may be "" or "batch"; NewBatch is the batch client either way). It makes
// no request.
func NewBatch(cfg Config) (*Batch, error) {
	cfg = cfg.withDefaults()
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	base, _ := checkURL(cfg.BaseURL) // New checked it
	client := *cfg.HTTPClient
	next := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// net/http strips Authorization on a redirect to another host,
		// but not x-api-key.
		if !sameHost(req.URL, base) {
			req.Header.Del("x-api-key")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &Batch{
		m:       m,
		client:  &client,
		apiKey:  m.apiKey,
		base:    base,
		baseURL: strings.TrimRight(cfg.BaseURL, "/"),
		outputs: make(map[string]outputTool),
	}, nil
}

// sameHost reports whether u is on base's scheme and host.
func sameHost(u, base *url.URL) bool {
	return strings.EqualFold(u.Scheme, base.Scheme) && strings.EqualFold(u.Host, base.Host)
}

// String describes b by its server, never showing the API key.
func (b *Batch) String() string { return "anthropic.Batch(" + b.m.baseURL + ")" }

// GoString is String, so that %#v shows no API key either.
func (b *Batch) GoString() string { return b.String() }

// Limits returns Message Batches' limits: BatchMaxLines, BatchMaxBytes and
// BatchWindow.
func (b *Batch) Limits() batchmode.Limits {
	return batchmode.Limits{MaxLines: BatchMaxLines, MaxBytes: BatchMaxBytes, Window: BatchWindow}
}

// Encode returns the request {"custom_id":id,"params":PARAMS} of a Message
// Batch, PARAMS being the Messages body Generate sends for req. id must
// match ^[a-zA-Z0-9_-]{1,64}$, as the API requires. Errors are
// *llm.APIError wrapping llm.ErrBadRequest: an id of another form, or a
// request Generate would refuse too.
func (b *Batch) Encode(id string, req *llm.Request) ([]byte, error) {
	if !customID.MatchString(id) {
		return nil, badRequest(fmt.Sprintf("batch custom_id %q: want 1 to 64 of a-z, A-Z, 0-9, _ and -", id))
	}
	c, err := b.m.translate(req)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(c.params)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("encode request: %v", err))
	}
	line, err := json.Marshal(struct {
		CustomID string          `json:"custom_id"`
		Params   json.RawMessage `json:"params"`
	}{id, params})
	if err != nil {
		return nil, badRequest(fmt.Sprintf("encode request: %v", err))
	}
	if c.output != "" {
		b.mu.Lock()
		b.outputs[id] = outputTool{c.output, c.wrapped}
		b.mu.Unlock()
	}
	return line, nil
}

// Upload returns "": the Message Batches API takes its requests in the
// body of Create, not as a file. It makes no request.
func (b *Batch) Upload(ctx context.Context, name string, lines [][]byte) (string, error) {
	return "", nil
}

// batchObject is a Message Batch as the API returns it.
type batchObject struct {
	ID                string     `json:"id"`
	Type              string     `json:"type"`
	ProcessingStatus  string     `json:"processing_status"`
	RequestCounts     counts     `json:"request_counts"`
	CreatedAt         time.Time  `json:"created_at"`
	CancelInitiatedAt *time.Time `json:"cancel_initiated_at"`
	ResultsURL        *string    `json:"results_url"`
}

// counts are a batch's request_counts.
type counts struct {
	Processing int `json:"processing"`
	Succeeded  int `json:"succeeded"`
	Errored    int `json:"errored"`
	Canceled   int `json:"canceled"`
	Expired    int `json:"expired"`
}

func (c counts) done() int  { return c.Succeeded + c.Errored + c.Canceled + c.Expired }
func (c counts) total() int { return c.done() + c.Processing }

// Create creates a Message Batch of lines (fileID is unused: the API takes
// no files) and returns its id. tag is not sent: the API keeps no metadata
// with a batch (see Find). A line that refers to a document by file id
// makes the request name the Files API beta. Errors are *llm.APIError:
// 429 is llm.ErrRateLimited and 529 llm.ErrOverloaded, both transient.
func (b *Batch) Create(ctx context.Context, fileID string, lines [][]byte, tag string) (string, error) {
	if len(lines) == 0 {
		return "", badRequest("batch: no requests")
	}
	var body bytes.Buffer
	body.WriteString(`{"requests":[`)
	files := false
	for i, l := range lines {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(l)
		// In a line's JSON a document's file source is the only place
		// these bytes occur unescaped: in text they would be \"type\".
		files = files || bytes.Contains(l, []byte(`"type":"file"`))
	}
	body.WriteString(`]}`)
	h := http.Header{"Content-Type": {"application/json"}}
	if files {
		h.Set("anthropic-beta", filesBeta)
	}
	var obj batchObject
	if err := b.call(ctx, http.MethodPost, b.baseURL+batchPath, body.Bytes(), h, &obj); err != nil {
		return "", err
	}
	if obj.ID == "" {
		return "", b.m.newError(0, "malformed batch: no id", llm.ErrServer, 0)
	}
	return obj.ID, nil
}

// listPage is one page of the list of batches, newest first.
type listPage struct {
	Data    []batchObject `json:"data"`
	HasMore bool          `json:"has_more"`
	LastID  string        `json:"last_id"`
}

// Find returns the id of the batch of n requests created at or after since,
// when exactly one such batch exists; "" when there is none or several.
// The Message Batches API keeps no metadata with a batch and takes no
// files, so tag and fileID cannot identify it: the count of its requests
// and its creation time are all there is, and two candidates are too many
// to choose from (the caller submits again rather than poll a batch that
// may not be its own). Find pages through the list (newest first) until
// the batches are older than since.
func (b *Batch) Find(ctx context.Context, fileID, tag string, n int, since time.Time) (string, error) {
	var (
		found []string
		after string
	)
	for {
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("after_id", after)
		}
		var page listPage
		if err := b.call(ctx, http.MethodGet, b.baseURL+batchPath+"?"+q.Encode(), nil, nil, &page); err != nil {
			return "", err
		}
		older := len(page.Data) > 0
		for _, o := range page.Data {
			if o.CreatedAt.Before(since) {
				continue
			}
			older = false
			if o.RequestCounts.total() == n && o.ID != "" {
				found = append(found, o.ID)
			}
		}
		if !page.HasMore || page.LastID == "" || page.LastID == after || older {
			break
		}
		after = page.LastID
	}
	if len(found) != 1 {
		return "", nil
	}
	return found[0], nil
}

// Poll returns the batch's state: in_progress and canceling are Running,
// ended is Ended. Done and Total come from request_counts; Expired and
// Cancelled are set when some requests expired or were cancelled, or (for
// Cancelled) once a cancel was asked.
func (b *Batch) Poll(ctx context.Context, batchID string) (batchmode.Status, error) {
	obj, err := b.get(ctx, batchID)
	if err != nil {
		return batchmode.Status{}, err
	}
	st := batchmode.Status{
		Expired:   obj.RequestCounts.Expired > 0,
		Cancelled: obj.RequestCounts.Canceled > 0 || obj.CancelInitiatedAt != nil,
		Done:      obj.RequestCounts.done(),
		Total:     obj.RequestCounts.total(),
	}
	switch obj.ProcessingStatus {
	case "in_progress", "canceling":
		st.State = batchmode.Running
	case "ended":
		st.State = batchmode.Ended
	default:
		return batchmode.Status{}, b.m.newError(0, fmt.Sprintf("batch %s: unknown processing_status %q", batchID, obj.ProcessingStatus), llm.ErrServer, 0)
	}
	return st, nil
}

// get reads the batch batchID.
func (b *Batch) get(ctx context.Context, batchID string) (*batchObject, error) {
	if batchID == "" {
		return nil, badRequest("batch: empty id")
	}
	var obj batchObject
	if err := b.call(ctx, http.MethodGet, b.baseURL+batchPath+"/"+url.PathEscape(batchID), nil, nil, &obj); err != nil {
		return nil, err
	}
	return &obj, nil
}

// Cancel asks Anthropic to cancel the batch; it moves to canceling, then to
// ended with its unprocessed requests canceled.
func (b *Batch) Cancel(ctx context.Context, batchID string) error {
	if batchID == "" {
		return badRequest("batch: empty id")
	}
	var obj batchObject
	return b.call(ctx, http.MethodPost, b.baseURL+batchPath+"/"+url.PathEscape(batchID)+"/cancel", nil, nil, &obj)
}

// Delete does nothing: the Message Batches API has no files (the ids the
// Model passes are all ""), and an ended batch's results expire with it on
// Anthropic's side after 29 days.
func (b *Batch) Delete(ctx context.Context, fileIDs ...string) error { return nil }

// Results reads the results of the ended batch batchID from its
// results_url, one JSONL line at a time, and calls yield with each line's
// result: a succeeded line's answer, read as Generate reads one; an
// errored line's *llm.APIError, of the class Generate gives that error
// type; a canceled or expired line's error wrapping
// batchmode.ErrUnanswered. A malformed line yields an *llm.APIError
// wrapping llm.ErrServer that names the line, with the line's custom_id
// when it can be read ("" otherwise). The API key goes with the request
// for the results only when results_url is on the base URL's scheme and
// host. st is unused: the results_url is read from the batch.
func (b *Batch) Results(ctx context.Context, batchID string, st batchmode.Status, yield func(batchmode.Result) error) error {
	obj, err := b.get(ctx, batchID)
	if err != nil {
		return err
	}
	if obj.ResultsURL == nil || *obj.ResultsURL == "" {
		return b.m.newError(0, fmt.Sprintf("batch %s (%s) has no results_url", batchID, obj.ProcessingStatus), llm.ErrServer, 0)
	}
	ref, err := url.Parse(*obj.ResultsURL)
	if err != nil {
		return b.m.newError(0, fmt.Sprintf("batch %s: malformed results_url", batchID), llm.ErrServer, 0)
	}
	u := b.base.ResolveReference(ref)
	if u.Scheme != "http" && u.Scheme != "https" {
		return b.m.newError(0, fmt.Sprintf("batch %s: results_url scheme %q, want http or https", batchID, u.Scheme), llm.ErrServer, 0)
	}
	resp, err := b.send(ctx, http.MethodGet, u.String(), nil, nil, sameHost(u, b.base))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return b.errorOf(resp)
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, err := readLine(r)
		if err != nil && err != io.EOF {
			llm.HideURLs(err)
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return b.m.newError(0, fmt.Sprintf("batch %s: read results: %v", batchID, err), llm.ErrConnection, 0)
		}
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			res := b.result(n, line, tooLong)
			if yerr := yield(res); yerr != nil {
				return yerr
			}
			b.forget(res)
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine reads one line of r without its newline, keeping at most
// maxResultLine bytes of it; tooLong says more were dropped.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > maxResultLine {
			tooLong = true
		} else {
			line = append(line, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// forget drops what Encode remembered of a line once its result is out.
func (b *Batch) forget(res batchmode.Result) {
	if res.ID == "" {
		return
	}
	b.mu.Lock()
	delete(b.outputs, res.ID)
	b.mu.Unlock()
}

// resultLine is one line of a batch's results.
type resultLine struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	} `json:"result"`
}

// result reads line n of a batch's results. It never panics: a line it
// cannot read is a result with an error that names the line.
func (b *Batch) result(n int, line []byte, tooLong bool) batchmode.Result {
	malformed := func(id, why string) batchmode.Result {
		return batchmode.Result{ID: id, Err: b.m.newError(0, fmt.Sprintf("malformed batch result line %d: %s", n, why), llm.ErrServer, 0)}
	}
	if tooLong {
		return malformed("", fmt.Sprintf("longer than %d bytes", maxResultLine))
	}
	var rl resultLine
	if err := json.Unmarshal(line, &rl); err != nil {
		return malformed("", err.Error())
	}
	id := rl.CustomID
	if id == "" {
		return malformed("", "no custom_id")
	}
	switch rl.Result.Type {
	case "succeeded":
		// The SDK's decoding takes anything; a message is an object.
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(rl.Result.Message, &probe); err != nil || probe == nil {
			return malformed(id, "succeeded without a message object")
		}
		var msg sdk.Message
		if err := json.Unmarshal(rl.Result.Message, &msg); err != nil {
			return malformed(id, "message: "+err.Error())
		}
		b.mu.Lock()
		out, known := b.outputs[id]
		b.mu.Unlock()
		if !known {
			out = guessOutput(&msg)
		}
		c := &call{output: out.name, wrapped: out.wrapped}
		return batchmode.Result{ID: id, Resp: c.response(&msg)}
	case "errored":
		if len(rl.Result.Error) == 0 {
			return malformed(id, "errored without an error")
		}
		return batchmode.Result{ID: id, Err: b.m.statusError(0, nil, string(rl.Result.Error), "")}
	case "canceled", "expired":
		return batchmode.Result{ID: id, Err: &llm.APIError{
			Backend: backendName,
			Message: "batch request " + rl.Result.Type,
			Err:     batchmode.ErrUnanswered,
		}}
	default:
		return malformed(id, fmt.Sprintf("result type %q", rl.Result.Type))
	}
}

// batchagentOutput matches the names batchagent gives its output tool:
// the agent's "output" and the packer's "batchagent_pack" (internal/pack),
// with the suffix llm.OutputSpec.ToolName adds when a tool has the name.
var batchagentOutput = regexp.MustCompile(`^(output|batchagent_pack)(_[0-9]+)?$`)

// guessOutput returns the output tool of an answer whose request this
// process did not encode (the results of a batch an earlier process
// submitted): a call of a tool named as batchagent names its output tool,
// wrapped when its input is {"value": V} with V not an object, as
// outputSchema wraps a schema that is not an object. The agent validates
// the answer either way, and asks again on a wrong guess.
func guessOutput(msg *sdk.Message) outputTool {
	for _, blk := range msg.Content {
		if blk.Type != "tool_use" || !batchagentOutput.MatchString(blk.Name) {
			continue
		}
		var obj map[string]json.RawMessage
		wrapped := false
		if json.Unmarshal(blk.Input, &obj) == nil && len(obj) == 1 {
			v := bytes.TrimSpace(obj[wrapKey])
			wrapped = len(v) > 0 && v[0] != '{'
		}
		return outputTool{name: blk.Name, wrapped: wrapped}
	}
	return outputTool{}
}

// call sends a request to a batch endpoint on the base URL and decodes its
// JSON answer into out.
func (b *Batch) call(ctx context.Context, method, u string, body []byte, h http.Header, out any) error {
	resp, err := b.send(ctx, method, u, body, h, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return b.errorOf(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
	if err != nil {
		llm.HideURLs(err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return b.m.newError(0, "connection failed: "+err.Error(), llm.ErrConnection, 0)
	}
	if len(data) > maxJSONBody {
		return b.m.newError(0, fmt.Sprintf("answer over %d bytes", maxJSONBody), llm.ErrServer, 0)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return b.m.newError(0, "malformed response: "+err.Error(), llm.ErrServer, 0)
	}
	return nil
}

// send sends one request, with the API key when key is set. The error is
// ctx's own once ctx is done, else an *llm.APIError wrapping
// llm.ErrConnection or llm.ErrTimeout.
func (b *Batch) send(ctx context.Context, method, u string, body []byte, h http.Header, key bool) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, badRequest("build request: " + b.m.redact.Redact(llm.HideURLs(err).Error()))
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("anthropic-version", apiVersion)
	req.Header.Set("Accept", "application/json")
	if key && *b.apiKey != "" {
		req.Header.Set("x-api-key", string(*b.apiKey))
	}
	resp, err := b.client.Do(req)
	if err != nil {
		llm.HideURLs(err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		if isTimeout(err) {
			return nil, b.m.newError(0, "timeout: "+err.Error(), llm.ErrTimeout, 0)
		}
		return nil, b.m.newError(0, "connection failed: "+err.Error(), llm.ErrConnection, 0)
	}
	return resp, nil
}

// errorOf classifies an error response as Generate does, with its
// Retry-After and rate-limit headers.
func (b *Batch) errorOf(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	return b.m.statusError(resp.StatusCode, resp.Header, string(data), "")
}
