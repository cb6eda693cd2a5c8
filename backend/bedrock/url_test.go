package bedrock_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/bedrock"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		want    bedrock.Config
		wantErr string
	}{
		{"region", "bedrock://us-east-1", bedrock.Config{Region: "us-east-1"}, ""},
		{"no region", "bedrock://", bedrock.Config{}, ""},
		{"model", "bedrock://us-west-2?model=anthropic.claude-3-5-haiku-20241022-v1:0",
			bedrock.Config{Region: "us-west-2", Model: "anthropic.claude-3-5-haiku-20241022-v1:0"}, ""},
		{"inference profile ARN", "bedrock://eu-west-1?model=arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0",
			bedrock.Config{Region: "eu-west-1", Model: "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0"}, ""},
		{"endpoint", "bedrock://us-east-1?endpoint=http://127.0.0.1:9999",
			bedrock.Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:9999"}, ""},
		{"all", "bedrock://us-east-1?model=m&max_tokens=512&concurrency=8&cache=false",
			bedrock.Config{Region: "us-east-1", Model: "m", MaxTokens: 512, Concurrency: 8, DisableCachePoints: true}, ""},
		{"cache on", "bedrock://us-east-1?cache=true", bedrock.Config{Region: "us-east-1"}, ""},
		{"last value wins", "bedrock://us-east-1?model=a&model=b", bedrock.Config{Region: "us-east-1", Model: "b"}, ""},
		{"unknown parameter", "bedrock://us-east-1?modle=m", bedrock.Config{}, `unknown parameter "modle"`},
		{"wrong scheme", "anthropic://us-east-1", bedrock.Config{}, `scheme "anthropic"`},
		{"credentials", "bedrock://AKID:secret@us-east-1", bedrock.Config{}, "credentials in the URL"},
		{"path", "bedrock://us-east-1/model", bedrock.Config{}, "want bedrock://REGION"},
		{"port", "bedrock://us-east-1:443", bedrock.Config{}, "want bedrock://REGION"},
		{"bad max tokens", "bedrock://us-east-1?max_tokens=many", bedrock.Config{}, "parameter max_tokens"},
		{"negative concurrency", "bedrock://us-east-1?concurrency=-1", bedrock.Config{}, "concurrency -1 is negative"},
		{"bad cache", "bedrock://us-east-1?cache=maybe", bedrock.Config{}, "parameter cache"},
		{"bad endpoint", "bedrock://us-east-1?endpoint=127.0.0.1:9999", bedrock.Config{}, "not an http(s) URL"},
		{"bad region", "bedrock://US_EAST", bedrock.Config{}, "invalid region"},
		{"unparsable with a secret", "bedrock://AKID:sk-pw@us-east-1:port", bedrock.Config{}, "bedrock: backend URL"},
		{"path with a secret", "bedrock://us-east-1/x?key=sk-pw", bedrock.Config{}, "want bedrock://REGION"},
		{"fragment with a secret", "bedrock://us-east-1#sk-pw", bedrock.Config{}, "fragment"},
		{"credentials in the endpoint", "bedrock://us-east-1?endpoint=http://AKID:sk-pw@h", bedrock.Config{}, "endpoint has credentials"},
		{"query in the endpoint", "bedrock://us-east-1?endpoint=" + url.QueryEscape("http://h/?X-Amz-Security-Token=sk-pw"), bedrock.Config{}, "endpoint http://h has a query"},
		{"unparsable endpoint with a secret", "bedrock://us-east-1?endpoint=" + url.QueryEscape("http://u:sk-pw@h:port"), bedrock.Config{}, "not an http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := bedrock.ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v, want an error containing %q", tt.url, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "sk-pw") {
					t.Errorf("ParseURL(%q) error %q repeats the secret", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q) = %v, want no error", tt.url, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) mismatch (-want +got):\n%s", tt.url, diff)
			}
		})
	}
}
