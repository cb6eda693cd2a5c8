package openai

import (
	"errors"
	"testing"

	"github.com/batchagent/batchagent/backend/batchmode"
	"github.com/batchagent/batchagent/llm"
)

// FuzzBatchResultLine holds the parser of output and error file lines to
// its contract: any line yields a result that is either an answer with a
// custom_id or an error, an *llm.APIError with a class, never a panic.
func FuzzBatchResultLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"batch_req_1","custom_id":"c1","response":{"status_code":200,"request_id":"req_1","body":{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}}},"error":null}`,
		`{"id":"batch_req_2","custom_id":"c2","response":{"status_code":200,"request_id":"req_2","body":{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}},"error":null}`,
		`{"id":"batch_req_3","custom_id":"c3","response":{"status_code":400,"request_id":"req_3","body":{"error":{"message":"bad","type":"invalid_request_error","code":"context_length_exceeded"}}},"error":null}`,
		`{"id":"batch_req_4","custom_id":"c4","response":null,"error":{"code":"batch_expired","message":"expired"}}`,
		`{"id":"batch_req_5","custom_id":"c5","response":null,"error":{"code":"batch_cancelled","message":"cancelled"}}`,
		`{"id":"batch_req_6","custom_id":"c6","response":{"status_code":200,"body":{"choices":`,
		`{"custom_id":"c7","response":{"status_code":200,"body":{"choices":[]}}}`,
		`{"custom_id":"c8","response":{"status_code":200,"body":{"error":{"message":"late","code":"500"}}}}`,
		`{"custom_id":"c9"}`,
		`[1,2]`, `null`, `{"custom_id":{"x":"custom_id"},"custom_id":"c10"}`,
	} {
		f.Add([]byte(s))
	}
	b, err := NewBatch(Config{Flavor: FlavorOpenAI})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r := b.parseLine("file-1", 7, line)
		switch {
		case r.Err == nil && r.Resp == nil:
			t.Fatalf("no answer and no error for %q", line)
		case r.Err != nil && r.Resp != nil:
			t.Fatalf("both an answer and an error for %q", line)
		case r.Err == nil && r.ID == "":
			t.Fatalf("an answer without a custom_id for %q", line)
		case r.Err != nil:
			ae, ok := errors.AsType[*llm.APIError](r.Err)
			if !ok || ae.Err == nil {
				t.Fatalf("error %v for %q is not an APIError with a class", r.Err, line)
			}
			if errors.Is(r.Err, batchmode.ErrUnanswered) && r.ID == "" {
				t.Fatalf("unanswered without a custom_id for %q", line)
			}
		}
	})
}
