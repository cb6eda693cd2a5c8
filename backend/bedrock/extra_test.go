package bedrock_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

// TestExtraFieldsRefused: Converse has no place for a request's extra
// fields, so each is refused by name before anything is sent: never
// dropped. The capability says so.
func TestExtraFieldsRefused(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	m, err := bedrock.New(t.Context(), bedrock.Config{Endpoint: srv.URL, Region: "us-east-1", Model: "test-model",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	if x := m.Capabilities().Extra; x.Verbatim || x.Accepts("top_k") {
		t.Errorf("Capabilities().Extra = %+v, want none taken", x)
	}
	for _, name := range []string{"logprobs", "top_k", "parallel_tool_calls", "guided_json"} {
		req := backendtest.Request(backendtest.Plain)
		req.Extra = map[string]json.RawMessage{name: json.RawMessage(`1`)}
		_, err := m.Generate(t.Context(), req)
		if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("Generate with %s = %v, want ErrBadRequest naming it", name, err)
		}
		for _, err := range m.Stream(t.Context(), req) {
			if !errors.Is(err, llm.ErrBadRequest) || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("Stream with %s = %v, want ErrBadRequest naming it", name, err)
			}
			break
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}
