package openaibatch

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/server"
)

// DefaultEvery is how often Run polls the batch.
const DefaultEvery = 100 * time.Millisecond

// Input is a requests file, read once by Scan.
type Input struct {
	// Path is the file's path.
	Path string
	// SHA256 is the hex SHA-256 of its content: Run finds the batch of
	// the same content by it.
	SHA256 string
	// Models are the models its lines name, each once, in first-seen
	// order.
	Models []string
}

// Scan reads the requests file at path once: its SHA-256 and the models
// its lines name.
func Scan(path string) (Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return Input{}, err
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(make([]byte, 64<<10), server.DefaultMaxBodyBytes+64<<10)
	seen := map[string]bool{}
	in := Input{Path: path}
	for sc.Scan() {
		var l struct {
			Body struct {
				Model string `json:"model"`
			} `json:"body"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Body.Model != "" && !seen[l.Body.Model] {
			seen[l.Body.Model] = true
			in.Models = append(in.Models, l.Body.Model)
		}
	}
	if err := sc.Err(); err != nil {
		return Input{}, fmt.Errorf("%s: %w", path, err)
	}
	in.SHA256 = hex.EncodeToString(h.Sum(nil))
	return in, nil
}

// Batch is the part of a Batch API's batch object that Run reads.
type Batch struct {
	ID           string            `json:"id"`
	Status       string            `json:"status"` // validating, in_progress, ..., completed, failed, expired, cancelled
	OutputFileID string            `json:"output_file_id"`
	ErrorFileID  string            `json:"error_file_id"`
	Metadata     map[string]string `json:"metadata"`
	// RequestCounts counts the batch's lines.
	RequestCounts struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
	// Model is the model the requests name (the first line's).
	Model string `json:"model"`
	// Usage sums the tokens of the lines that succeeded; set once the
	// batch has ended, nil before (and from an API that does not report
	// it).
	Usage *Usage `json:"usage"`
	// Errors say why a failed batch failed.
	Errors struct {
		Data []LineError `json:"data"`
	} `json:"errors"`
}

// Usage is a batch's token usage, as the Batch API reports it.
type Usage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens int64 `json:"output_tokens"`
}

// LLM returns u as an llm.Usage.
func (u Usage) LLM() llm.Usage {
	return llm.Usage{PromptTokens: u.InputTokens, CachedTokens: u.InputTokensDetails.CachedTokens, CompletionTokens: u.OutputTokens}
}

// LineError is why a batch failed: what is wrong on which line of the
// input (1-based).
type LineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line"`
}

// Ended reports whether b's status is final: completed, failed, expired
// or cancelled.
func (b Batch) Ended() bool {
	return slices.Contains([]string{"completed", "failed", "expired", "cancelled"}, b.Status)
}

// Config says what Run runs, through which API, and where the results go.
type Config struct {
	// API serves the Batch API (files and batches): the gateway's
	// handler, called in-process.
	API http.Handler
	// Input is the requests file, as Scan read it.
	Input Input
	// Out is the results file, written once the batch ends (through a
	// temporary file beside it, renamed at the end).
	Out string
	// Every is how often the batch is polled. Defaults to DefaultEvery.
	Every time.Duration
	// OnPoll, when set, is called with each state of the batch read,
	// from Run's goroutine: the last once it ends.
	OnPoll func(Batch)
}

// Run runs c.Input through c.API: it finds the batch of the input's
// content in the API's store (which resumes it, if unfinished), or
// uploads the input and creates one; polls it until it ends; and, unless
// it failed, writes every line's result to c.Out in input order: output
// lines and error lines in OpenAI's format, each custom_id once. It
// returns the batch as it ended; a failed batch is no error (its Errors
// say why). When ctx ends first, Run returns the batch last read and
// ctx's error, writing nothing: running again resumes.
func Run(ctx context.Context, c Config) (Batch, error) {
	every := c.Every
	if every <= 0 {
		every = DefaultEvery
	}
	poll := func(b Batch) {
		if c.OnPoll != nil {
			c.OnPoll(b)
		}
	}
	b, err := findOrCreate(c.API, c.Input)
	if err != nil {
		return Batch{}, err
	}
	for !b.Ended() {
		poll(b)
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(every):
		}
		if err := callJSON(c.API, http.MethodGet, "/v1/batches/"+b.ID, "", nil, &b); err != nil {
			return b, err
		}
	}
	poll(b)
	if b.Status == "failed" {
		return b, nil
	}
	return b, writeResults(c.API, c.Input.Path, c.Out, b.OutputFileID, b.ErrorFileID)
}
