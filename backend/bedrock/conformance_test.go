package bedrock_test

import (
	"testing"

	"github.com/batchagent/batchagent/backend/backendtest"
	"github.com/batchagent/batchagent/llm"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Backend{
		Name:    "bedrock",
		New:     func(t *testing.T, baseURL string) llm.Model { return newModel(t, baseURL) },
		Handler: fixture,
	})
}
