package anthropic

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/batchagent/batchagent/llm"
)

// Defaults of [Config].
const (
	// DefaultBaseURL is Anthropic's hosted API.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens caps the generated tokens of a request that does not
	// say (the Messages API requires max_tokens).
	DefaultMaxTokens = 4096
	// DefaultConcurrency is the number of concurrent calls the backend
	// suggests starting with: low, as befits a hosted API with rate limits.
	DefaultConcurrency = 4
)

// backendName is the Backend of every [llm.APIError] of this package.
const backendName = "anthropic"

// requestTimeout bounds one non-streamed call when ctx has no earlier
// deadline. It replaces the SDK's own bound, which refuses non-streamed
// calls with a large max_tokens outright.
const requestTimeout = time.Hour

// Config configures a [Model]. The zero value is valid: the hosted API, no
// key, no default model, DefaultMaxTokens and a private HTTP client.
type Config struct {
	// BaseURL is the server's root URL; requests go to BaseURL/v1/messages.
	// It must be an absolute http or https URL without credentials, query
	// or fragment. Defaults to DefaultBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header. Zero means none is sent (a
	// local llama.cpp or Ollama server needs none).
	APIKey llm.Secret
	// Model is the model used when [llm.Request.Model] is empty. Zero means
	// the request's model is sent as is.
	Model string
	// MaxTokens is used when [llm.Request.MaxTokens] is zero. Defaults to
	// DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests. Zero means a private client with
	// connection, TLS and response-header timeouts (never
	// http.DefaultClient). Per-call deadlines come from the context.
	HTTPClient *http.Client
	// WrapTransport, if set, wraps the transport of the default client
	// (for example to propagate trace context to the API); it is not
	// applied to HTTPClient, whose transport the caller wraps. Defaults to
	// none.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Concurrency overrides the DefaultConcurrency that Capabilities
	// reports. Zero means DefaultConcurrency.
	Concurrency int
	// Mode is how calls reach the API: "" for real-time Messages calls
	// ([New]), "batch" for Message Batches ([NewBatch]). It tells the
	// caller which constructor to use; neither constructor reads it
	// beyond refusing another value. Zero means real time.
	Mode string
}

// ModeBatch is the [Config.Mode] of Message Batches.
const ModeBatch = "batch"

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient()
		if c.WrapTransport != nil {
			c.HTTPClient.Transport = c.WrapTransport(c.HTTPClient.Transport)
		}
	}
	return c
}

func (c Config) validate() error {
	if _, err := checkURL(c.BaseURL); err != nil {
		return err
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("anthropic: max tokens = %d, want >= 0", c.MaxTokens)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("anthropic: concurrency = %d, want >= 0", c.Concurrency)
	}
	if c.Mode != "" && c.Mode != ModeBatch {
		return fmt.Errorf("anthropic: mode %q, want \"\" or %q", c.Mode, ModeBatch)
	}
	return nil
}

// checkURL parses BaseURL: an absolute http or https URL without
// credentials, query or fragment. Errors never repeat the URL's text, which
// may hold a secret.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// A *url.Error quotes raw.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("anthropic: base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("anthropic: base URL: scheme %q, want http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("anthropic: base URL: no host")
	case u.User != nil:
		return nil, errors.New("anthropic: base URL has credentials; pass the API key in Config.APIKey")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// Named by scheme and host alone: the rest may hold a key.
		where := &url.URL{Scheme: u.Scheme, Host: u.Host}
		return nil, fmt.Errorf("anthropic: base URL %s has a query or fragment", where)
	}
	return u, nil
}

// defaultHTTPClient returns a client of its own, so that nothing another
// package does to http.DefaultClient reaches it. It has no overall timeout,
// which would cut long streams: the caller's context bounds each call.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	// A non-streamed answer arrives only once it is generated.
	t.ResponseHeaderTimeout = 10 * time.Minute
	t.IdleConnTimeout = 90 * time.Second
	// A batch runs many calls to one host at once; keep their connections.
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// Model is an Anthropic Messages API backend: an [llm.Model], an
// [llm.Streamer] and an [llm.Capable]. It is immutable after New and safe
// for concurrent use.
type Model struct {
	client sdk.Client
	apiKey *llm.Secret // a pointer: printing a Model shows no key
	// redact removes the key and the secret parts of the base URL (see
	// llm.URLSecrets) from the text of errors.
	redact    *llm.Redactor
	baseURL   string // scheme and host, for String
	model     string
	maxTokens int
	caps      llm.Capabilities
}

// New returns a Model for cfg. It returns an error if cfg's BaseURL is not
// an absolute http(s) URL without credentials, query or fragment, or a
// count is negative; the error never repeats the URL. New makes no request
// and reads no environment variable.
func New(cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, _ := checkURL(cfg.BaseURL) // validate checked it
	opts := []option.RequestOption{
		// The SDK would otherwise read ANTHROPIC_* variables and profile
		// files: configuration comes from cfg only.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		// batchagent's agent loop owns retries.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(string(cfg.APIKey)))
	}
	return &Model{
		client:    sdk.NewClient(opts...),
		apiKey:    &cfg.APIKey,
		redact:    llm.NewRedactor(append(llm.URLSecrets(cfg.BaseURL), cfg.APIKey)...),
		baseURL:   base.Scheme + "://" + base.Host,
		model:     cfg.Model,
		maxTokens: cfg.MaxTokens,
		caps: llm.Capabilities{
			Streaming:          true,
			NativeTools:        true,
			NativeJSONSchema:   true,
			PromptCaching:      true,
			DefaultConcurrency: cfg.Concurrency,
			Media:              media,
			Extra:              llm.ExtraFields{Translated: extraFields},
		},
	}, nil
}

// String describes m by its server, never showing the API key.
func (m *Model) String() string { return "anthropic.Model(" + m.baseURL + ")" }

// GoString is String, so that %#v shows no API key either.
func (m *Model) GoString() string { return m.String() }

// Capabilities reports streaming, native tools, native structured output
// (through an output tool), prompt caching (through cache_control markers),
// media (images and PDF documents, as bytes or by URL, documents also by
// file id; no audio) and the configured concurrency.
func (m *Model) Capabilities() llm.Capabilities { return m.caps }

// URL parameters of [ParseURL].
var urlParams = []string{"concurrency", "max_tokens", "mode", "model"}

// ParseURL parses a backend URL into a Config:
//
//	anthropic://                              the hosted API (DefaultBaseURL)
//	anthropic+http://host:port                a compatible server (llama.cpp, Ollama)
//	anthropic+https://host:port/path          a compatible server under a path
//
// Query parameters: model (the default model), max_tokens and concurrency
// (positive integers), and mode ("batch" for Message Batches, through
// [NewBatch]; another mode is an error). Unknown parameters, credentials in the URL, a
// fragment and a host in anthropic:// are errors, none of which repeats the
// URL. The API key is never read from the URL: the caller sets
// Config.APIKey (the CLI reads ANTHROPIC_API_KEY).
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes raw, which may hold a key by mistake.
		return Config{}, fmt.Errorf("anthropic: invalid backend URL")
	}
	if u.User != nil {
		return Config{}, fmt.Errorf("anthropic: credentials in the backend URL; set ANTHROPIC_API_KEY instead")
	}
	if u.Fragment != "" {
		return Config{}, errors.New("anthropic: unexpected fragment in the backend URL")
	}
	var cfg Config
	switch u.Scheme {
	case "anthropic":
		if u.Host != "" || strings.Trim(u.Path, "/") != "" || u.Opaque != "" {
			return Config{}, fmt.Errorf("anthropic: anthropic:// takes no host or path; use anthropic+https://host/path for another server")
		}
		cfg.BaseURL = DefaultBaseURL
	case "anthropic+http", "anthropic+https":
		if u.Host == "" {
			return Config{}, fmt.Errorf("anthropic: %s URL without a host", u.Scheme)
		}
		base := url.URL{Scheme: strings.TrimPrefix(u.Scheme, "anthropic+"), Host: u.Host, Path: strings.TrimRight(u.Path, "/")}
		cfg.BaseURL = base.String()
	default:
		return Config{}, fmt.Errorf("anthropic: scheme %q, want anthropic, anthropic+http or anthropic+https", u.Scheme)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("anthropic: query: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(query)) {
		vals := query[key]
		v := vals[len(vals)-1]
		switch key {
		case "model":
			cfg.Model = v
		case "mode":
			if v != ModeBatch {
				return Config{}, fmt.Errorf("anthropic: parameter mode = %q, want %q", v, ModeBatch)
			}
			cfg.Mode = v
		case "max_tokens", "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Config{}, fmt.Errorf("anthropic: parameter %s = %q, want a positive integer", key, v)
			}
			if key == "max_tokens" {
				cfg.MaxTokens = n
			} else {
				cfg.Concurrency = n
			}
		default:
			return Config{}, fmt.Errorf("anthropic: unknown parameter %q (known: %s)", key, strings.Join(urlParams, ", "))
		}
	}
	return cfg, nil
}
