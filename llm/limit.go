package llm

import "fmt"

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
