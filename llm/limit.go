package llm

import (
	"fmt"
	"io"
)

// Size caps of an answer, enforced by the client whatever the server does:
// a server may ignore max_tokens and stream without end.
const (
	// BytesPerToken is the generous bytes-per-token ratio that turns a
	// token cap into a byte cap: tokens average about four bytes of text,
	// and few exceed sixteen.
	BytesPerToken = 32
	// MinAnswerBytes is the least byte cap of an answer, however small
	// its token cap.
	MinAnswerBytes = 64 << 10
	// MaxAnswerBytes is the absolute byte cap of an answer, and the cap of
	// an answer without a token cap.
	MaxAnswerBytes = 16 << 20
)

// AnswerLimit returns the most bytes of text and tool-call arguments that
// an answer to a request with the given token cap may hold: maxTokens ×
// [BytesPerToken], at least [MinAnswerBytes] and at most
// [MaxAnswerBytes]. A maxTokens of zero or less means no token cap, and
// gives MaxAnswerBytes.
func AnswerLimit(maxTokens int) int {
	if maxTokens <= 0 || maxTokens > MaxAnswerBytes/BytesPerToken {
		return MaxAnswerBytes
	}
	return max(maxTokens*BytesPerToken, MinAnswerBytes)
}

// BodyLimit returns the most bytes a non-streamed response body to a
// request with the given token cap may hold: twice its [AnswerLimit]
// (JSON escapes the text) plus 1 MiB for the envelope.
func BodyLimit(maxTokens int) int64 { return 2*int64(AnswerLimit(maxTokens)) + 1<<20 }

// LimitBody returns rc, a non-streamed response body to a request with the
// given token cap, read no further than [BodyLimit](maxTokens): reading
// more fails with a *[SizeError] (a server that ignored the token cap).
// Closing it closes rc.
func LimitBody(rc io.ReadCloser, maxTokens int) io.ReadCloser {
	return &limitedBody{rc: rc, limit: BodyLimit(maxTokens), maxTokens: maxTokens}
}

// limitedBody is the io.ReadCloser of LimitBody.
type limitedBody struct {
	rc        io.ReadCloser
	limit, n  int64
	maxTokens int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.n >= b.limit {
		// Only more data past the limit is an error, not its end.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, &SizeError{Limit: b.limit, MaxTokens: b.maxTokens}
	}
	n, err := b.rc.Read(p[:min(int64(len(p)), b.limit-b.n)])
	b.n += int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// SizeError reports an answer cut off because it outgrew its byte cap. It
// wraps [ErrTruncated].
type SizeError struct {
	// Limit is the byte cap that was reached.
	Limit int64
	// MaxTokens is the token cap of the request, zero when none was sent.
	MaxTokens int
}

func (e *SizeError) Error() string {
	if e.MaxTokens > 0 {
		return fmt.Sprintf("answer cut at the %d-byte size cap (max_tokens %d): the server did not stop at the token cap", e.Limit, e.MaxTokens)
	}
	return fmt.Sprintf("answer cut at the %d-byte size cap", e.Limit)
}

// Unwrap returns [ErrTruncated].
func (e *SizeError) Unwrap() error { return ErrTruncated }
