package bedrock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/batchagent/batchagent/llm"
)

// Defaults of [Config].
const (
	// DefaultMaxTokens caps the generated tokens of a request that does not
	// say (Converse requires a cap for some models).
	DefaultMaxTokens = 4096
	// DefaultConcurrency is the number of concurrent calls the backend
	// declares safe to start with: Bedrock's on-demand quotas are low.
	DefaultConcurrency = 4
)

// Config configures a [Model]. The zero value is valid: the region and the
// credentials then come from the default AWS chain (AWS_REGION,
// AWS_PROFILE, ~/.aws/config, the instance role...).
type Config struct {
	// Region is the AWS region, e.g. "us-east-1". Zero means the region of
	// the default AWS configuration; New fails when there is none.
	Region string
	// Model is the model ID (or inference profile ID or ARN) used when a
	// request names none, e.g. "anthropic.claude-3-5-haiku-20241022-v1:0".
	// Zero means every request must name its model.
	Model string
	// Endpoint overrides the service's base URL, e.g. for a VPC endpoint, a
	// proxy or a test server: an absolute http or https URL without
	// credentials, query or fragment. Zero means the region's public
	// endpoint.
	Endpoint string
	// HTTPClient sends the requests. Zero means a client with connect and
	// TLS handshake timeouts and no overall timeout (a request's context
	// bounds it), which honours AWS_CA_BUNDLE when the default AWS
	// configuration is read.
	HTTPClient *http.Client
	// Credentials signs the requests. Zero means the default AWS credential
	// chain. The package never prints or logs it.
	Credentials aws.CredentialsProvider
	// MaxTokens caps the generated tokens of requests whose MaxTokens is
	// zero. Defaults to DefaultMaxTokens.
	MaxTokens int
	// Concurrency overrides the DefaultConcurrency declared in
	// Capabilities. Zero means DefaultConcurrency.
	Concurrency int
	// DisableCachePoints stops the cachePoint markers after the system
	// blocks and the tool definitions, for models without prompt caching
	// that reject them. Zero means the markers are sent.
	DisableCachePoints bool
}

func (c Config) withDefaults() Config {
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("bedrock: max tokens %d is negative", c.MaxTokens))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("bedrock: concurrency %d is negative", c.Concurrency))
	}
	if c.Region != "" && !validRegion(c.Region) {
		errs = append(errs, fmt.Errorf("bedrock: invalid region %q", c.Region))
	}
	if c.Endpoint != "" {
		if err := checkEndpoint(c.Endpoint); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkEndpoint checks an Endpoint: an absolute http or https URL without
// credentials, query or fragment. Errors never repeat the URL's text, which
// may hold a secret.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bedrock: endpoint is not an http(s) URL: %w", urlErr(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("bedrock: endpoint is not an http(s) URL: scheme %q", u.Scheme)
	case u.Host == "":
		return errors.New("bedrock: endpoint is not an http(s) URL: no host")
	case u.User != nil:
		return errors.New("bedrock: endpoint has credentials in the URL: use the AWS credential chain")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// Named by scheme and host alone: the rest may hold a secret.
		return fmt.Errorf("bedrock: endpoint %s has a query or fragment", &url.URL{Scheme: u.Scheme, Host: u.Host})
	}
	return nil
}

// urlErr returns the cause of a url.Parse error without the *url.Error
// around it, which quotes the URL.
func urlErr(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// validRegion reports whether r can name a region: lowercase letters,
// digits and hyphens.
func validRegion(r string) bool {
	for _, c := range r {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return r != ""
}

// Model is the Bedrock backend. It is safe for concurrent use and immutable
// after New.
type Model struct {
	client      *bedrockruntime.Client
	model       string
	maxTokens   int
	concurrency int
	cachePoints bool
	// secrets removes the credentials in use and the secret parts of the
	// endpoint (see llm.URLSecrets) from the text of errors.
	secrets *secrets
}

var (
	_ llm.Model    = (*Model)(nil)
	_ llm.Streamer = (*Model)(nil)
	_ llm.Capable  = (*Model)(nil)
)

// New returns a Model for cfg. It reads the default AWS configuration
// (files and environment, no network) when cfg leaves the region or the
// credentials unset, and then also honours its endpoint settings
// (AWS_ENDPOINT_URL_BEDROCK_RUNTIME) and CA bundle. It returns an error for an invalid cfg, an unreadable
// AWS configuration, or no region anywhere. The SDK's own retries are off.
func New(ctx context.Context, cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The SDK's buildable client, unlike an *http.Client, can take the CA
	// bundle of the AWS configuration (AWS_CA_BUNDLE).
	var hc aws.HTTPClient = cfg.HTTPClient
	if cfg.HTTPClient == nil {
		hc = defaultHTTPClient()
	}
	awsCfg := aws.Config{Region: cfg.Region, Credentials: cfg.Credentials, HTTPClient: hc}
	if cfg.Credentials == nil || cfg.Region == "" {
		opts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region)}
		if cfg.HTTPClient == nil {
			opts = append(opts, config.WithHTTPClient(hc))
		}
		loaded, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("bedrock: load AWS configuration: %w", err)
		}
		if cfg.Credentials != nil {
			loaded.Credentials = cfg.Credentials
		}
		if cfg.HTTPClient != nil {
			loaded.HTTPClient = cfg.HTTPClient
		}
		awsCfg = loaded
	}
	if awsCfg.Region == "" {
		return nil, errors.New("bedrock: no region: set Config.Region, AWS_REGION or a profile's region")
	}
	sec := newSecrets(llm.URLSecrets(cfg.Endpoint))
	switch c := awsCfg.Credentials.(type) {
	case aws.AnonymousCredentials, nil:
	case *aws.CredentialsCache:
		awsCfg.Credentials = credentialsTagger{c, sec}
	default:
		awsCfg.Credentials = aws.NewCredentialsCache(credentialsTagger{c, sec})
	}
	client := bedrockruntime.NewFromConfig(awsCfg, func(o *bedrockruntime.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// batchagent's agent loop owns retries.
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 0
		o.HTTPClient = plainBodyClient{next: o.HTTPClient}
	})
	return &Model{
		client:      client,
		model:       cfg.Model,
		maxTokens:   cfg.MaxTokens,
		concurrency: cfg.Concurrency,
		cachePoints: !cfg.DisableCachePoints,
		secrets:     sec,
	}, nil
}

// credentialsTagger marks the failures of a credentials provider, which
// the SDK reports as untyped errors, so that they are classed as
// authentication failures, and tells secrets the credentials it retrieves.
type credentialsTagger struct {
	aws.CredentialsProvider
	secrets *secrets
}

func (c credentialsTagger) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return creds, &credentialsError{err: err}
	}
	c.secrets.use(creds)
	return creds, nil
}

// credentialsError is a failure to retrieve credentials.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return "retrieve AWS credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// defaultHTTPClient bounds connecting, not answering: a non-streaming
// Converse call sends its headers only once the whole answer is generated,
// which takes minutes for long answers, so the request's context is what
// bounds a call.
func defaultHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSHandshakeTimeout = 10 * time.Second
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = 64
		})
}

// ParseURL parses a "bedrock://REGION" backend URL into a Config. The host
// is the region (empty: the default AWS configuration's). Query
// parameters: model (the default model ID), endpoint (a base URL
// override), max_tokens and concurrency (integers) and cache (a boolean,
// false to disable cache points). Unknown parameters are an error, and so
// are credentials in the URL and a fragment; errors never repeat the URL.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("bedrock: backend URL: %w", urlErr(err))
	}
	if u.Scheme != "bedrock" {
		return Config{}, fmt.Errorf("bedrock: scheme %q, want \"bedrock\"", u.Scheme)
	}
	if u.User != nil {
		return Config{}, errors.New("bedrock: credentials in the URL: use the AWS credential chain")
	}
	// Errors name no part of the URL but the region: the rest may hold a
	// secret.
	if u.Port() != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return Config{}, errors.New("bedrock: backend URL: want bedrock://REGION?model=ID")
	}
	if u.Fragment != "" {
		return Config{}, errors.New("bedrock: backend URL: unexpected fragment")
	}
	cfg := Config{Region: u.Hostname()}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("bedrock: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(query)) {
		vals := query[key]
		v := vals[len(vals)-1]
		switch key {
		case "model":
			cfg.Model = v
		case "endpoint":
			cfg.Endpoint = v
		case "max_tokens", "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Config{}, fmt.Errorf("bedrock: parameter %s: %w", key, err)
			}
			if key == "max_tokens" {
				cfg.MaxTokens = n
			} else {
				cfg.Concurrency = n
			}
		case "cache":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("bedrock: parameter %s: %w", key, err)
			}
			cfg.DisableCachePoints = !b
		default:
			return Config{}, fmt.Errorf("bedrock: unknown parameter %q (known: model, endpoint, max_tokens, concurrency, cache)", key)
		}
	}
	return cfg, cfg.validate()
}

// Capabilities declares streaming, native tools, native JSON schema (an
// output tool), prompt caching (cache points, unless disabled), media
// (images and documents as bytes; nothing by URL, no audio) and the
// configured concurrency.
func (m *Model) Capabilities() llm.Capabilities {
	return llm.Capabilities{
		Streaming:          true,
		NativeTools:        true,
		NativeJSONSchema:   true,
		PromptCaching:      m.cachePoints,
		DefaultConcurrency: m.concurrency,
		Media:              media,
	}
}

// Generate calls Converse for req. Failures are *llm.APIError values
// wrapping a class sentinel (see the package documentation); a cancelled
// ctx yields ctx's error.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p, err := m.buildParams(req)
	if err != nil {
		return nil, err
	}
	out, err := m.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId:         &p.modelID,
		Messages:        p.messages,
		System:          p.system,
		ToolConfig:      p.toolConfig,
		InferenceConfig: p.inference,
	}, limitBody(int(aws.ToInt32(p.inference.MaxTokens))))
	if err != nil {
		return nil, m.classify(ctx, err)
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, &llm.APIError{Backend: backendName, Message: "response carries no message", Err: llm.ErrServer}
	}
	var b answer
	for _, block := range msg.Value.Content {
		switch block := block.(type) {
		case *types.ContentBlockMemberText:
			b.text = append(b.text, block.Value...)
		case *types.ContentBlockMemberToolUse:
			input := []byte("{}")
			if block.Value.Input != nil {
				if input, err = block.Value.Input.MarshalSmithyDocument(); err != nil {
					return nil, &llm.APIError{Backend: backendName, Message: fmt.Sprintf("tool use input: %v", err), Err: llm.ErrServer}
				}
			}
			name := aws.ToString(block.Value.Name)
			if p.output != "" && name == p.output {
				if !b.hasOutput { // the first answer counts
					b.output, b.hasOutput = input, true
				}
				continue
			}
			b.calls = append(b.calls, llm.ToolCall{ID: aws.ToString(block.Value.ToolUseId), Name: name, Arguments: input})
		default:
			// Reasoning, citations, images: not part of the answer.
		}
	}
	resp := b.response(out.StopReason)
	resp.Usage = usage(out.Usage)
	return resp, nil
}

// answer collects the parts of an assistant message.
type answer struct {
	text      []byte
	calls     []llm.ToolCall
	output    []byte // the output tool's input
	hasOutput bool
}

// response returns the assistant message: the output tool's input, as
// compact JSON, replaces the text when the model called that tool and no
// other. An answer given alongside calls of real tools is dropped: the
// model answers again once it has their results, and the conversation sent
// back then holds only the calls the agent answered.
func (a *answer) response(stop types.StopReason) *llm.Response {
	msg := llm.Message{Role: llm.RoleAssistant, Content: string(a.text), ToolCalls: a.calls}
	if a.hasOutput && len(a.calls) == 0 {
		msg.Content = compactJSON(a.output)
	}
	finish := finishReason(stop, len(a.calls) > 0)
	return &llm.Response{Message: msg, FinishReason: finish}
}

// finishReason maps Bedrock's stop reason.
func finishReason(stop types.StopReason, calls bool) llm.FinishReason {
	switch stop {
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return llm.FinishLength
	}
	if calls {
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}

// usage converts Bedrock's token counts: its input count excludes the
// tokens read from or written to the prompt cache.
func usage(u *types.TokenUsage) llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	read := int64(aws.ToInt32(u.CacheReadInputTokens))
	write := int64(aws.ToInt32(u.CacheWriteInputTokens))
	return llm.Usage{
		PromptTokens:     int64(aws.ToInt32(u.InputTokens)) + read + write,
		CompletionTokens: int64(aws.ToInt32(u.OutputTokens)),
		CachedTokens:     read,
		CacheWriteTokens: write,
	}
}
