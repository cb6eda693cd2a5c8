package bedrock

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchagent/batchagent/llm"
)

// secrets redacts what errors must not show: the secret parts of the
// endpoint, and the secret access key and session token of the credentials
// last retrieved (a server or proxy may echo the session token, which is
// sent with every request). It is safe for concurrent use; a nil *secrets
// redacts nothing.
type secrets struct {
	fixed []llm.Secret

	mu sync.Mutex // protects the fields below
	// key and token are the credentials r was built with.
	key, token string
	r          *llm.Redactor
}

func newSecrets(fixed []llm.Secret) *secrets {
	return &secrets{fixed: fixed, r: llm.NewRedactor(fixed...)}
}

// use makes the redactor cover creds, when they changed.
func (s *secrets) use(creds aws.Credentials) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if creds.SecretAccessKey == s.key && creds.SessionToken == s.token {
		return
	}
	s.key, s.token = creds.SecretAccessKey, creds.SessionToken
	s.r = llm.NewRedactor(append(s.fixed[:len(s.fixed):len(s.fixed)], llm.Secret(s.key), llm.Secret(s.token))...)
}

// redact removes the secrets from text.
func (s *secrets) redact(text string) string {
	if s == nil {
		return text
	}
	s.mu.Lock()
	r := s.r
	s.mu.Unlock()
	return r.Redact(text)
}
