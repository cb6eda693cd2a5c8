package bedrock

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/batchagent/batchagent/llm"
)

// TestUsageCacheWrite checks Bedrock's cache read and write counts are
// kept apart: writes are billed above the input price.
func TestUsageCacheWrite(t *testing.T) {
	got := usage(&types.TokenUsage{InputTokens: aws.Int32(100), CacheReadInputTokens: aws.Int32(40), CacheWriteInputTokens: aws.Int32(25), OutputTokens: aws.Int32(7)})
	want := llm.Usage{PromptTokens: 165, CompletionTokens: 7, CachedTokens: 40, CacheWriteTokens: 25}
	if got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
}
