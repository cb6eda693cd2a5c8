package openai

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/batchagent/batchagent/llm"
)

// Forward implements [llm.Forwarder]: it posts body, verbatim, to path
// ("/v1/embeddings" or "/v1/completions") under BaseURL, with the API key,
// and returns the upstream's answer. An HTTP error status is returned as
// the *llm.APIError a chat completion gets (see statusError).
func (m *Model) Forward(ctx context.Context, path string, body []byte) (*http.Response, error) {
	// BaseURL ends in /v1 (or its equivalent): path is under it.
	rel := strings.TrimPrefix(path, "/v1")
	u := strings.TrimSuffix(m.baseURL.String(), "/") + rel
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		llm.HideURLs(err)
		return nil, m.errorf(0, llm.ErrBadRequest, "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if *m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+string(*m.apiKey))
	}
	resp, err := m.httpClient.Do(req)
	if err != nil {
		return nil, m.transportError(ctx, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, m.statusError(resp)
	}
	return resp, nil
}
