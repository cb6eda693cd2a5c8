package batchmode

import (
	"context"
	"time"

	"github.com/batchagent/batchagent/llm"
)

// A Provider is one provider's batch API, as the [Model] drives it:
// OpenAI's Files and Batches (backend/openai), Anthropic's Message Batches
// (backend/anthropic). A submission is made in two steps, Upload then
// Create, so that the Model can journal the uploaded file before the batch
// that bills for it exists, and find that batch again (Find) after a crash
// between Create's request and the journaling of its answer.
//
// Errors are *llm.APIError wrapping a class sentinel, as a Model's are: a
// transient one (llm.Retryable) is tried again after a pause, any other
// fails the calls of the submission.
type Provider interface {
	// Limits returns the provider's limits on one submission.
	Limits() Limits
	// Encode returns req as one line of a submission whose custom_id is
	// id: for OpenAI, the JSONL line {"custom_id", "method", "url",
	// "body"}; for Anthropic, the JSON object {"custom_id", "params"}. Its
	// length counts against Limits.MaxBytes. An error is the request's
	// own (a part the provider cannot take): that call fails alone.
	Encode(id string, req *llm.Request) ([]byte, error)
	// Upload stores the lines of a submission with the provider, if its
	// API takes them as a file (OpenAI: a JSONL file with purpose batch),
	// and returns the file's id; "" for an API that takes the lines in
	// Create's request (Anthropic). name is a file name for the upload.
	Upload(ctx context.Context, name string, lines [][]byte) (fileID string, err error)
	// Create creates the batch of the uploaded file (or of lines, for an
	// API without files) and returns its id. tag is a unique name of the
	// submission that the provider keeps with the batch where it can
	// (OpenAI's metadata), for Find.
	Create(ctx context.Context, fileID string, lines [][]byte, tag string) (batchID string, err error)
	// Find returns the id of the batch created from fileID (or from n
	// lines, for an API without files) with tag, by an earlier process
	// whose Create's answer was lost; "" when there is none. since is when
	// that process started Create: batches created before it are not
	// candidates.
	Find(ctx context.Context, fileID, tag string, n int, since time.Time) (batchID string, err error)
	// Poll returns the batch's state.
	Poll(ctx context.Context, batchID string) (Status, error)
	// Results calls yield with the result of each line of the ended batch
	// whose state is st, in any order, and stops at yield's first error,
	// which it returns. A line the output does not answer (expired,
	// cancelled, never run) is left out or yielded with Err wrapping
	// ErrUnanswered: the Model asks it again either way.
	Results(ctx context.Context, batchID string, st Status, yield func(Result) error) error
	// Cancel asks the provider to stop the batch.
	Cancel(ctx context.Context, batchID string) error
	// Delete deletes files the Model no longer needs (the uploaded input,
	// the output and error files); an already deleted file is no error.
	Delete(ctx context.Context, fileIDs ...string) error
}

// Limits are a provider's limits on one submission; a zero field is no
// limit.
type Limits struct {
	// MaxLines is the most requests one batch may hold (OpenAI 50,000;
	// Anthropic 100,000).
	MaxLines int
	// MaxBytes is the most bytes one batch's lines may take (OpenAI
	// 200 MB; Anthropic 256 MB).
	MaxBytes int64
	// Window is the completion window asked for (OpenAI "24h").
	Window time.Duration
}

// State is where a batch is.
type State int

// The states of a batch, provider-neutral: OpenAI's validating and
// in_progress, and Anthropic's in_progress, are Running; OpenAI's
// finalizing is Running too (its files are not ready).
const (
	// Running: lines may still be answered.
	Running State = iota + 1
	// Ended: the batch finished; every line has a result or none will
	// come (Status.Expired, Status.Cancelled say why some have none).
	Ended
	// Failed: the batch was refused as a whole (OpenAI's failed: the
	// input file did not validate); Status.Reason says why. No line ran.
	Failed
)

// Status is a batch's state as Poll reads it.
type Status struct {
	State State
	// Expired: the window ended before every line ran; Cancelled: the
	// batch was cancelled. Lines without a result are asked again.
	Expired, Cancelled bool
	// OutputFile and ErrorFile are the ids of the result files, for
	// Results and Delete; "" for an API without files or none yet.
	OutputFile, ErrorFile string
	// Reason is why a Failed batch failed, as the provider said.
	Reason string
	// Retry: the Failed batch was refused for the moment, not for its
	// content (OpenAI's token_limit_exceeded: the organization's
	// enqueued-token limit): its lines are submitted again later, in
	// smaller submissions.
	Retry bool
	// Done and Total count the batch's lines that have ended and all of
	// them, when the provider reports it.
	Done, Total int
}

// Result is one line's result.
type Result struct {
	// ID is the line's custom_id.
	ID string
	// Resp is the answer, when the line succeeded.
	Resp *llm.Response
	// Err is the line's failure: an *llm.APIError with the class of the
	// provider's error (a 400 is ErrBadRequest, a 500 ErrServer), or
	// ErrUnanswered for a line that expired, was cancelled or never ran.
	Err error
}
