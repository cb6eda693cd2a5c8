package bedrock

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/batchagent/batchagent/internal/retry"
	"github.com/batchagent/batchagent/llm"
)

// authHint ends the message of an authentication failure.
const authHint = "check the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance role) and their bedrock:InvokeModel permission"

// errorClasses maps Bedrock's (and AWS's common) error codes to classes.
// ValidationException is decided by its message (see contextLengthText).
var errorClasses = map[string]error{
	"ThrottlingException":           llm.ErrRateLimited,
	"TooManyRequestsException":      llm.ErrRateLimited,
	"ServiceQuotaExceededException": llm.ErrRateLimited,
	"ServiceUnavailableException":   llm.ErrOverloaded,
	"ModelNotReadyException":        llm.ErrOverloaded,
	"InternalServerException":       llm.ErrServer,
	"InternalFailure":               llm.ErrServer,
	"ModelStreamErrorException":     llm.ErrServer,
	"ModelErrorException":           llm.ErrServer,
	"ModelTimeoutException":         llm.ErrTimeout,
	"ResourceNotFoundException":     llm.ErrBadRequest,
	"ConflictException":             llm.ErrBadRequest,
	"AccessDeniedException":         llm.ErrAuth,
	"UnrecognizedClientException":   llm.ErrAuth,
	"InvalidSignatureException":     llm.ErrAuth,
	"IncompleteSignature":           llm.ErrAuth,
	"MissingAuthenticationToken":    llm.ErrAuth,
	"InvalidClientTokenId":          llm.ErrAuth,
	"ExpiredTokenException":         llm.ErrAuth,
	"SignatureDoesNotMatch":         llm.ErrAuth,
}

// contextLengthText are pieces of the messages with which Bedrock and its
// models reject a conversation longer than the context window, lowercase.
var contextLengthText = []string{
	"input is too long",
	"prompt is too long",
	"too many tokens",
	"too many input tokens",
	"context length",
	"context_length",
	"context window",
	"maximum context",
}

// classify turns an error of the SDK, for a call made with ctx, into an
// *llm.APIError whose message holds neither the credentials nor more of the
// endpoint than its scheme and host; a done ctx yields ctx's error instead.
func (m *Model) classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	llm.HideURLs(err) // net/http quotes the request URL
	if te := truncated(err); te != nil {
		return te
	}
	ae := &llm.APIError{Backend: backendName}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil {
		ae.StatusCode = re.HTTPStatusCode()
		ae.RetryAfter = retry.ParseRetryAfter(re.Response.Header, time.Now())
	}
	var apiErr smithy.APIError
	switch {
	case errors.As(err, &apiErr):
		code, msg := apiErr.ErrorCode(), apiErr.ErrorMessage()
		ae.Err = codeClass(code, msg, ae.StatusCode)
		ae.Message = code
		if msg != "" {
			ae.Message += ": " + msg
		}
		if strings.Contains(strings.ToLower(msg), "prompt caching") {
			// Models without prompt caching refuse cachePoint blocks, at
			// times with a 403: not a credentials problem.
			ae.Err = llm.ErrBadRequest
			ae.Message += " (for a model without prompt caching, set Config.DisableCachePoints or cache=false in the backend URL)"
		}
	case ae.StatusCode >= 400:
		ae.Err = statusClass(ae.StatusCode)
		ae.Message = http.StatusText(ae.StatusCode)
	default:
		ae.Err = transportClass(err)
		ae.Message = transportMessage(err)
	}
	if errors.Is(ae.Err, llm.ErrAuth) {
		ae.Message = "authentication failed: " + authHint + ": " + ae.Message
	}
	ae.Message = m.secrets.redact(ae.Message)
	return ae
}

// codeClass classifies an error the service named.
func codeClass(code, msg string, status int) error {
	if code == "ValidationException" {
		lower := strings.ToLower(msg)
		for _, s := range contextLengthText {
			if strings.Contains(lower, s) {
				return llm.ErrContextLength
			}
		}
		return llm.ErrBadRequest
	}
	if class, ok := errorClasses[code]; ok {
		return class
	}
	if status >= 400 {
		return statusClass(status)
	}
	return llm.ErrServer // an unknown exception event within a stream
}

// statusClass classifies an HTTP error status.
func statusClass(status int) error {
	switch {
	case status == http.StatusTooManyRequests:
		return llm.ErrRateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return llm.ErrOverloaded
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return llm.ErrTimeout
	case status == http.StatusBadGateway:
		// A proxy in front of the endpoint could not reach it: a
		// connection failure, retried for the outage budget.
		return llm.ErrConnection
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.ErrAuth
	case status >= 500:
		return llm.ErrServer
	default:
		return llm.ErrBadRequest
	}
}

// transportClass classifies a failure without an answer from the service.
func transportClass(err error) error {
	var (
		netErr  net.Error
		sendErr *smithyhttp.RequestSendError
		signErr *v4.SigningError
		credErr *credentialsError
		invalid smithy.InvalidParamsError
	)
	switch {
	case errors.As(err, &credErr), errors.As(err, &signErr):
		return llm.ErrAuth // no credentials could be retrieved
	case errors.As(err, &invalid):
		return llm.ErrBadRequest
	case errors.As(err, &netErr) && netErr.Timeout():
		return llm.ErrTimeout
	case errors.As(err, &sendErr), errors.As(err, &netErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return llm.ErrConnection
	default:
		// Malformed events (bad frames, bad JSON) and anything unknown: the
		// service's fault, worth a retry.
		return llm.ErrServer
	}
}

// transportMessage explains a failure without an answer from the service,
// without the SDK's operation and response prefixes.
func transportMessage(err error) string {
	var (
		deserr *smithy.DeserializationError
		opErr  *smithy.OperationError
	)
	switch {
	case errors.As(err, &deserr) && deserr.Err != nil:
		return "malformed response: " + deserr.Err.Error()
	case errors.As(err, &opErr) && opErr.Err != nil:
		return opErr.Err.Error()
	}
	return err.Error()
}
