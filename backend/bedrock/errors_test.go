package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
	"github.com/batchagent/batchagent/llm"
)

// TestErrorClasses checks the class, status, wait and message of the
// errors Bedrock answers with, through Generate and Stream.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		code       string // X-Amzn-ErrorType; empty: none
		msg        string
		retryAfter string
		want       error
		wantWait   time.Duration
	}{
		{"throttled", 429, "ThrottlingException", "Too many tokens, please wait before trying again.", "2", llm.ErrRateLimited, 2 * time.Second},
		{"throttled without wait", 429, "ThrottlingException", "Too many requests", "", llm.ErrRateLimited, 0},
		{"quota", 400, "ServiceQuotaExceededException", "Your request exceeds the service quota.", "", llm.ErrRateLimited, 0},
		{"unavailable", 503, "ServiceUnavailableException", "Service unavailable", "", llm.ErrOverloaded, 0},
		{"model not ready", 429, "ModelNotReadyException", "Model is not ready", "", llm.ErrOverloaded, 0},
		{"internal", 500, "InternalServerException", "Internal error", "", llm.ErrServer, 0},
		{"model error", 424, "ModelErrorException", "The model failed", "", llm.ErrServer, 0},
		{"model timeout", 408, "ModelTimeoutException", "Model timed out", "", llm.ErrTimeout, 0},
		{"input too long", 400, "ValidationException", "Input is too long for requested model.", "", llm.ErrContextLength, 0},
		{"prompt too long", 400, "ValidationException", "The model returned the following errors: prompt is too long: 215000 tokens > 200000 maximum", "", llm.ErrContextLength, 0},
		{"too many input tokens", 400, "ValidationException", "Too many input tokens. Max input tokens: 8192, request input token count: 9000", "", llm.ErrContextLength, 0},
		{"malformed input", 400, "ValidationException", "Malformed input request, please reformat your input and try again.", "", llm.ErrBadRequest, 0},
		{"no such model", 404, "ResourceNotFoundException", "Model not found", "", llm.ErrBadRequest, 0},
		{"access denied", 403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", "", llm.ErrAuth, 0},
		{"bad signature", 403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.", "", llm.ErrAuth, 0},
		{"expired token", 403, "ExpiredTokenException", "The security token included in the request is expired", "", llm.ErrAuth, 0},
		{"no prompt caching", 403, "AccessDeniedException", "You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.", "", llm.ErrBadRequest, 0},
		{"proxy 502", 502, "", "Bad Gateway", "", llm.ErrConnection, 0},
		{"unknown 503", 503, "", "", "", llm.ErrOverloaded, 0},
		{"unknown 401", 401, "", "", "", llm.ErrAuth, 0},
		{"unknown 418", 418, "", "teapot", "", llm.ErrBadRequest, 0},
		{"unknown code", 409, "SomethingNewException", "new", "", llm.ErrBadRequest, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.code != "" {
					w.Header().Set("X-Amzn-ErrorType", tt.code)
				}
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				b, _ := json.Marshal(map[string]string{"message": tt.msg})
				w.Write(b)
			}))
			defer srv.Close()
			m := newModelWith(t, bedrockConfig(srv.URL, "test-model"))
			req := backendtest.Request(backendtest.Plain)
			_, genErr := m.Generate(t.Context(), req)
			var streamErr error
			for _, err := range m.Stream(t.Context(), req) {
				streamErr = err
			}
			for op, err := range map[string]error{"Generate": genErr, "Stream": streamErr} {
				var ae *llm.APIError
				if !errors.As(err, &ae) {
					t.Fatalf("%s() error = %#v, want an *llm.APIError", op, err)
				}
				if !errors.Is(err, tt.want) || ae.Backend != "bedrock" || ae.StatusCode != tt.status || ae.RetryAfter != tt.wantWait {
					t.Errorf("%s() = %v (status %d, wait %v), want class %v, status %d, wait %v",
						op, err, ae.StatusCode, ae.RetryAfter, tt.want, tt.status, tt.wantWait)
				}
				if tt.code != "" && !strings.Contains(ae.Message, tt.code) {
					t.Errorf("%s() message = %q, want it to name %s", op, ae.Message, tt.code)
				}
				if strings.Contains(err.Error(), backendtest.APIKey) {
					t.Errorf("%s() error %q leaks the secret key", op, err)
				}
			}
		})
	}
}

// TestStreamExceptions checks failures reported inside an event stream,
// after some text.
func TestStreamExceptions(t *testing.T) {
	tests := []struct {
		name  string
		tail  func(t testing.TB) []byte
		want  error
		inMsg string
	}{
		{"throttled", func(t testing.TB) []byte { return exceptionFrame(t, "throttlingException", "slow down") }, llm.ErrRateLimited, "slow down"},
		{"model stream error", func(t testing.TB) []byte {
			return exceptionFrame(t, "modelStreamErrorException", "the model failed")
		}, llm.ErrServer, "the model failed"},
		{"too long", func(t testing.TB) []byte {
			return exceptionFrame(t, "validationException", "Input is too long for requested model.")
		}, llm.ErrContextLength, "too long"},
		{"unavailable", func(t testing.TB) []byte { return exceptionFrame(t, "serviceUnavailableException", "busy") }, llm.ErrOverloaded, "busy"},
		{"bad checksum", func(t testing.TB) []byte {
			b := textDelta(t, 0, "more")
			b[len(b)-1] ^= 0xff
			return b
		}, llm.ErrServer, "event stream"},
		{"truncated frame", func(t testing.TB) []byte {
			b := textDelta(t, 0, "more")
			return b[:len(b)/2]
		}, llm.ErrConnection, "before messageStop"},
		{"no messageStop", func(t testing.TB) []byte { return metadata(t) }, llm.ErrConnection, "before messageStop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := append(append(messageStart(t), textDelta(t, 0, "Hello ")...), tt.tail(t)...)
			m := newModelWith(t, bedrock.Config{Endpoint: "http://bedrock.test", HTTPClient: cannedClient(body)})
			var (
				texts []string
				got   error
			)
			for ev, err := range m.Stream(t.Context(), backendtest.Request(backendtest.Plain)) {
				if err != nil {
					got = err
					break
				}
				if ev.Type == llm.EventText {
					texts = append(texts, ev.Text)
				}
			}
			var ae *llm.APIError
			if !errors.Is(got, tt.want) || !errors.As(got, &ae) || !strings.Contains(ae.Message, tt.inMsg) {
				t.Errorf("Stream() error = %v, want class %v with a message containing %q", got, tt.want, tt.inMsg)
			}
			if len(texts) != 1 || texts[0] != "Hello " {
				t.Errorf("Stream() texts before the failure = %q, want [\"Hello \"]", texts)
			}
		})
	}
}

// cannedClient answers every request with body as an event stream.
func cannedClient(body []byte) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}},
			Body:       readCloser(body),
			Request:    r,
		}, nil
	})}
}

func TestTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more: connection refused

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "1000") // then less: the server drops the connection
		if strings.HasSuffix(r.URL.Path, "/converse-stream") {
			d := textDelta(t, 0, "Hello")
			w.Write(append(messageStart(t), d[:len(d)/2]...))
			return
		}
		io.WriteString(w, `{"output":{"message":`)
	}))
	defer cut.Close()

	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no EC2 IMDS role found")
	})
	tests := []struct {
		name string
		cfg  bedrock.Config
		want error
	}{
		{"connection refused", bedrock.Config{Endpoint: url}, llm.ErrConnection},
		{"body cut", bedrock.Config{Endpoint: cut.URL}, llm.ErrConnection},
		{"no credentials", bedrock.Config{Endpoint: url, Credentials: failing}, llm.ErrAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Model = "test-model"
			m := newModelWith(t, tt.cfg)
			req := backendtest.Request(backendtest.Plain)
			_, genErr := m.Generate(t.Context(), req)
			var streamErr error
			for _, err := range m.Stream(t.Context(), req) {
				streamErr = err
			}
			for op, err := range map[string]error{"Generate": genErr, "Stream": streamErr} {
				var ae *llm.APIError
				if !errors.Is(err, tt.want) || !errors.As(err, &ae) || ae.Backend != "bedrock" {
					t.Errorf("%s() error = %v, want a bedrock *llm.APIError wrapping %v", op, err, tt.want)
				}
			}
		})
	}
}

func TestGenerateCanceled(t *testing.T) {
	reached := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		close(reached)
		<-r.Context().Done()
	}))
	defer srv.Close()
	m := newModelWith(t, bedrockConfig(srv.URL, "test-model"))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-reached
		cancel()
	}()
	_, err := m.Generate(ctx, backendtest.Request(backendtest.Plain))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Generate(canceled ctx) = %v, want context.Canceled", err)
	}
	if llm.IsTransient(err) {
		t.Errorf("IsTransient(%v) = true, want false", err)
	}
}
