package openai

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/batchagent/batchagent/llm"
)

// Flavor names the server behind an OpenAI-compatible endpoint. It decides
// the backend's capabilities, its default concurrency, how the token cap is
// sent and where queue depth is read.
type Flavor string

// The flavors.
const (
	// FlavorOpenAI is the OpenAI API itself.
	FlavorOpenAI Flavor = "openai"
	// FlavorVLLM is a vLLM server.
	FlavorVLLM Flavor = "vllm"
	// FlavorSGLang is an SGLang server.
	FlavorSGLang Flavor = "sglang"
	// FlavorLlamaCpp is a llama.cpp llama-server.
	FlavorLlamaCpp Flavor = "llamacpp"
	// FlavorOllama is an Ollama server.
	FlavorOllama Flavor = "ollama"
	// FlavorSim is batchagent's HTTP simulator (batchagent sim serve).
	FlavorSim Flavor = "sim"
	// FlavorGeneric is any other OpenAI-compatible server.
	FlavorGeneric Flavor = "generic"
)

// ErrNoQueueProbe is returned by [Model.QueueDepth] when the server exposes
// no queue-depth metrics that the backend knows how to read.
var ErrNoQueueProbe = errors.New("openai: no queue probe for this server")

// Timeouts of the default HTTP client. There is deliberately no overall
// client timeout, which would cut long streams: the caller's context bounds
// each call.
const (
	// DefaultDialTimeout bounds establishing a TCP connection.
	DefaultDialTimeout = 10 * time.Second
	// DefaultTLSHandshakeTimeout bounds the TLS handshake.
	DefaultTLSHandshakeTimeout = 10 * time.Second
	// DefaultResponseHeaderTimeout bounds the wait for response headers,
	// which a non-streamed call receives only once generation is over.
	DefaultResponseHeaderTimeout = 10 * time.Minute
	// DefaultProbeTimeout bounds one [Model.QueueDepth] call when its
	// context has no earlier deadline.
	DefaultProbeTimeout = 5 * time.Second
)

// Config configures a [Model]. Apart from BaseURL, the zero value of every
// field is valid.
type Config struct {
	// BaseURL is the API root that "/chat/completions" is appended to, e.g.
	// "https://api.openai.com/v1" or "http://127.0.0.1:8000/v1". It must be
	// an absolute http or https URL without credentials, query or fragment.
	// Defaults to the flavor's usual address (api.openai.com for openai,
	// 127.0.0.1 and the server's default port for vllm, sglang, llamacpp and
	// ollama); required for the generic and sim flavors.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer". Zero means no credentials,
	// as self-hosted servers usually need. It never appears in errors.
	APIKey llm.Secret
	// Model is the model name used when [llm.Request.Model] is empty. Zero
	// means the request must name one (the openai flavor) or that the server
	// picks its default (the others: "model" is then left out).
	Model string
	// Flavor is the server behind BaseURL. Defaults to FlavorGeneric.
	Flavor Flavor
	// HTTPClient sends the requests. Defaults to a client of its own with
	// connection, TLS-handshake and response-header timeouts (never
	// http.DefaultClient) and no overall timeout.
	HTTPClient *http.Client
	// WrapTransport, if set, wraps the transport of the default client
	// (for example to propagate trace context to the server); it is not
	// applied to HTTPClient, whose transport the caller wraps. Defaults to
	// none.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// MetricsURL is where [Model.QueueDepth] reads the server's Prometheus
	// metrics. Defaults to BaseURL's scheme and host plus "/metrics" for the
	// vllm, sglang, llamacpp and sim flavors; zero means no probe for the
	// others.
	MetricsURL string
	// Concurrency overrides [llm.Capabilities].DefaultConcurrency. Zero means
	// the flavor's default: openai 8, generic 16, vllm and sglang 64,
	// llamacpp 8, ollama 4, sim 64.
	Concurrency int
	// Mode is "" for the real-time chat-completions client ([New]) or
	// ModeBatch for OpenAI's Batch API ([NewBatch]), at the batch price;
	// the caller picks the constructor by it. Zero means real time.
	Mode string
	// Window is the completion window a batch asks for, in Batch mode.
	// Zero means DefaultBatchWindow (24h, the only one OpenAI offers).
	Window time.Duration
}

// ModeBatch is the Config.Mode of OpenAI's Batch API: see [NewBatch].
const ModeBatch = "batch"

// flavorInfo is what a flavor implies.
type flavorInfo struct {
	caps        llm.Capabilities
	baseURL     string // default BaseURL; empty: required
	metrics     bool   // serves Prometheus metrics at /metrics: QueueProbe
	maxTokensV2 bool   // sends max_completion_tokens instead of max_tokens
}

var flavors = map[Flavor]flavorInfo{
	FlavorOpenAI:   {caps: caps(true, 8, mediaAll), baseURL: "https://api.openai.com/v1", maxTokensV2: true},
	FlavorGeneric:  {caps: caps(false, 16, mediaImages)},
	FlavorVLLM:     {caps: caps(true, 64, mediaImages), baseURL: "http://127.0.0.1:8000/v1", metrics: true},
	FlavorSGLang:   {caps: caps(true, 64, mediaImages), baseURL: "http://127.0.0.1:30000/v1", metrics: true},
	FlavorLlamaCpp: {caps: caps(true, 8, mediaImages), baseURL: "http://127.0.0.1:8080/v1", metrics: true},
	FlavorOllama:   {caps: caps(false, 4, llm.Media{Image: true}), baseURL: "http://127.0.0.1:11434/v1"},
	FlavorSim:      {caps: simCaps(), metrics: true},
}

// simCaps returns the simulator's capabilities: it answers one choice
// whatever the request's n.
func simCaps() llm.Capabilities {
	c := caps(true, 64, mediaAll)
	c.Extra.OneChoice = true
	return c
}

// The content parts the flavors take besides text.
//
// OpenAI's API takes every part the chat wire has: image_url (https or
// data: URL), input_audio, and file (file_data or file_id). The
// simulator takes them all, as OpenAI does. vLLM, SGLang, llama.cpp's
// llama-server and most other OpenAI-compatible servers take image_url,
// by data: URL or by an http(s) URL they fetch, when the served model
// is multimodal; their input_audio and file support varies by version
// and model, so the backend does not claim it. Ollama's OpenAI endpoint
// takes images only as base64 data: URLs: it fetches no URL.
var (
	mediaAll    = llm.Media{Image: true, ImageURL: true, Audio: true, File: true, FileID: true}
	mediaImages = llm.Media{Image: true, ImageURL: true}
)

// caps returns a flavor's capabilities; New sets QueueProbe from the
// metrics URL.
func caps(promptCaching bool, concurrency int, media llm.Media) llm.Capabilities {
	media.Billing = billing
	return llm.Capabilities{
		Streaming:          true,
		NativeTools:        true,
		NativeJSONSchema:   true,
		PromptCaching:      promptCaching,
		DefaultConcurrency: concurrency,
		Media:              media,
		// An OpenAI-compatible server takes a request's extra fields
		// (logprobs, top_k, guided_json) as they came.
		Extra: llm.ExtraFields{Verbatim: true},
	}
}

// billing is how the OpenAI-compatible flavors' media are billed, for
// the agent's estimate where a server reports no media tokens: OpenAI's
// 512-px tiles (see internal/media.BillingOpenAI).
const billing = "openai"

// Model is an [llm.Model], [llm.Streamer], [llm.Capable] and
// [llm.QueueProber] that speaks the OpenAI chat-completions API. It is
// immutable after [New] and safe for concurrent use.
type Model struct {
	name   string // llm.APIError.Backend
	model  string
	apiKey *llm.Secret // a pointer: printing a Model shows no key
	// redact removes the key and the secret parts of the URLs (see
	// llm.URLSecrets) from the text of errors.
	redact     *llm.Redactor
	httpClient *http.Client
	client     oa.Client
	baseURL    *url.URL
	metricsURL string // empty: no probe
	// metricNames are the waiting and running gauges QueueDepth reads; empty
	// means any known pair.
	metricNames []metricPair
	caps        llm.Capabilities
	// maxTokensV2 is the flavor's: send the token cap as
	// max_completion_tokens and require a model name (the openai flavor).
	maxTokensV2 bool
}

// New returns a Model for cfg. It fails when cfg is invalid: an unknown
// flavor, a missing or malformed BaseURL, a malformed MetricsURL or a
// negative Concurrency. It makes no request.
func New(cfg Config) (*Model, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fi := flavors[cfg.Flavor]
	base, err := checkURL("BaseURL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.MetricsURL != "" {
		if _, err := checkURL("MetricsURL", cfg.MetricsURL); err != nil {
			return nil, err
		}
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("openai: Concurrency %d is negative", cfg.Concurrency)
	}

	m := &Model{
		name:        backendName(cfg.Flavor),
		model:       cfg.Model,
		apiKey:      &cfg.APIKey,
		redact:      llm.NewRedactor(append(append(llm.URLSecrets(cfg.BaseURL), llm.URLSecrets(cfg.MetricsURL)...), cfg.APIKey)...),
		httpClient:  cfg.HTTPClient,
		baseURL:     base,
		metricsURL:  cfg.MetricsURL,
		caps:        fi.caps,
		maxTokensV2: fi.maxTokensV2,
	}
	if m.httpClient == nil {
		m.httpClient = defaultHTTPClient()
		if cfg.WrapTransport != nil {
			m.httpClient.Transport = cfg.WrapTransport(m.httpClient.Transport)
		}
	}
	if names, ok := queueMetrics[cfg.Flavor]; ok {
		m.metricNames = []metricPair{names}
	}
	if m.metricsURL == "" && fi.metrics {
		m.metricsURL = (&url.URL{Scheme: base.Scheme, Host: base.Host, Path: "/metrics"}).String()
	}
	m.caps.QueueProbe = m.metricsURL != ""
	if cfg.Concurrency > 0 {
		m.caps.DefaultConcurrency = cfg.Concurrency
	}

	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(m.httpClient),
		option.WithMaxRetries(0), // the agent loop owns retries
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(string(cfg.APIKey)))
	}
	// A Client built from these options alone, rather than oa.NewClient,
	// which would also pick up OPENAI_API_KEY, OPENAI_BASE_URL and other
	// OPENAI_* variables from the environment and could send an OpenAI key
	// to a self-hosted server.
	m.client = oa.Client{Options: opts}
	return m, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Flavor == "" {
		c.Flavor = FlavorGeneric
	}
	fi, ok := flavors[c.Flavor]
	if !ok {
		return c, fmt.Errorf("openai: unknown flavor %q", c.Flavor)
	}
	if c.BaseURL == "" {
		if fi.baseURL == "" {
			return c, fmt.Errorf("openai: BaseURL is required for flavor %q", c.Flavor)
		}
		c.BaseURL = fi.baseURL
	}
	return c, nil
}

// checkURL parses an http or https URL without credentials, query or
// fragment. Errors never repeat the URL's text, which may hold a secret.
func checkURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("openai: %s: %w", field, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("openai: %s: scheme %q, want http or https", field, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("openai: %s: no host", field)
	case u.User != nil:
		return nil, fmt.Errorf("openai: %s: credentials in the URL; use Config.APIKey", field)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// Named by scheme and host alone: the rest may hold a key.
		where := &url.URL{Scheme: u.Scheme, Host: u.Host}
		return nil, fmt.Errorf("openai: %s: %s has a query or fragment", field, where)
	}
	return u, nil
}

// backendName is the llm.APIError.Backend of a flavor: its name, or
// "openai" for a generic OpenAI-compatible server.
func backendName(f Flavor) string {
	if f == FlavorGeneric {
		return "openai"
	}
	return string(f)
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // self-hosted servers take many concurrent calls
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   DefaultTLSHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: DefaultResponseHeaderTimeout,
	}}
}

// String describes m by flavor and the scheme and host of its base URL,
// never showing the API key nor the URL's path, which may hold a token.
func (m *Model) String() string {
	return fmt.Sprintf("openai.Model(%s %s://%s)", m.name, m.baseURL.Scheme, m.baseURL.Host)
}

// GoString is String, so that %#v shows no API key either.
func (m *Model) GoString() string { return m.String() }

// Capabilities reports what the server behind the Model supports; see
// [Config.Flavor]. QueueProbe is true when a metrics URL is known.
func (m *Model) Capabilities() llm.Capabilities { return m.caps }

// Generate sends req as a chat completion and returns the answer. Failures
// are *llm.APIError values wrapping a class sentinel (see the package
// documentation); a cancelled ctx yields an error wrapping ctx.Err().
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	body, err := m.body(req, false)
	if err != nil {
		return nil, err
	}
	var raw *http.Response
	if err := m.client.Post(ctx, "chat/completions", body, &raw); err != nil {
		return nil, m.callError(ctx, raw, err)
	}
	defer raw.Body.Close()
	resp, err := m.readCompletion(ctx, raw, req.MaxTokens)
	if err != nil {
		return nil, err
	}
	resp.RateLimit = rateLimit(raw.Header)
	return resp, nil
}

// scrub removes the API key, in any of the forms llm.Redactor knows, and
// the secret parts of the URLs from text that reaches an error.
func (m *Model) scrub(s string) string { return m.redact.Redact(s) }
