package bedrock_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"go.uber.org/goleak"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/backend/bedrock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// accessKeyID is the access key ID of the tests' static credentials; the
// secret is backendtest.APIKey.
const accessKeyID = "AKIDTEST"

// newModel returns a Model pointed at baseURL with the tests' static
// credentials.
func newModel(t testing.TB, baseURL string) *bedrock.Model {
	t.Helper()
	return newModelWith(t, bedrock.Config{Endpoint: baseURL})
}

// bedrockConfig is a Config pointed at baseURL with a default model.
func bedrockConfig(baseURL, model string) bedrock.Config {
	return bedrock.Config{Endpoint: baseURL, Model: model}
}

// newModelWith completes cfg with the tests' region and credentials.
func newModelWith(t testing.TB, cfg bedrock.Config) *bedrock.Model {
	t.Helper()
	cfg.Region = "us-east-1"
	if cfg.Credentials == nil {
		cfg.Credentials = credentials.NewStaticCredentialsProvider(accessKeyID, backendtest.APIKey, "")
	}
	m, err := bedrock.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("bedrock.New(%q) = %v", cfg.Endpoint, err)
	}
	return m
}

// roundTripFunc is an http.RoundTripper that answers without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readCloser returns a body reading b.
func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
