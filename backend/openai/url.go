package openai

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// urlScheme is what a backend URL scheme stands for.
type urlScheme struct {
	flavor      Flavor
	scheme      string // of the BaseURL
	defaultPort string // added when the URL names none; empty: none
	defaultHost bool   // an empty host means 127.0.0.1
}

var urlSchemes = map[string]urlScheme{
	"openai+http":  {flavor: FlavorGeneric, scheme: "http"},
	"openai+https": {flavor: FlavorGeneric, scheme: "https"},
	"vllm":         {flavor: FlavorVLLM, scheme: "http", defaultPort: "8000", defaultHost: true},
	"sglang":       {flavor: FlavorSGLang, scheme: "http", defaultPort: "30000", defaultHost: true},
	"llamacpp":     {flavor: FlavorLlamaCpp, scheme: "http", defaultPort: "8080", defaultHost: true},
	"ollama":       {flavor: FlavorOllama, scheme: "http", defaultPort: "11434", defaultHost: true},
	"sim+http":     {flavor: FlavorSim, scheme: "http"},
}

// ParseURL returns the Config a backend URL describes:
//
//	openai://                    https://api.openai.com/v1, FlavorOpenAI
//	openai+http://host:port/v1   http://host:port/v1, FlavorGeneric ("/v1" when the path is empty)
//	openai+https://host/v1       likewise over https
//	vllm://host:port             http://host:port/v1, FlavorVLLM (default port 8000)
//	sglang://host:port           FlavorSGLang (default port 30000)
//	llamacpp://host:port         FlavorLlamaCpp (default port 8080)
//	ollama://host:port           FlavorOllama (default port 11434)
//	sim+http://host:port         http://host:port/v1, FlavorSim
//
// vllm, sglang, llamacpp and ollama URLs may leave out the host
// (127.0.0.1); any URL but openai:// may give a path, which replaces "/v1".
// The query parameters are model=NAME, which sets Config.Model, and, for
// openai://, openai+http(s):// and sim+http:// alone, mode=batch, which
// sets Config.Mode to ModeBatch (OpenAI's Batch API, see [NewBatch]), and
// window=24h, its Config.Window; others are an error. Credentials are never part of the URL (the caller sets
// Config.APIKey), and a URL carrying any is refused without being repeated
// in the error.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Config{}, fmt.Errorf("openai: backend URL: %w", err)
	}
	if u.User != nil {
		return Config{}, errors.New("openai: backend URL: credentials in the URL; pass the API key separately")
	}
	// Errors name the URL by scheme and host alone: its path and query may
	// hold a secret.
	where := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	var cfg Config
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("openai: backend URL %s: query: %w", where, err)
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch k {
		case "model":
			cfg.Model = val
		case "mode":
			if val != ModeBatch {
				return Config{}, fmt.Errorf("openai: backend URL %s: unknown mode %q, want %q", where, val, ModeBatch)
			}
			cfg.Mode = val
		case "window":
			d, err := time.ParseDuration(val)
			if err != nil || d < time.Hour || d%time.Hour != 0 {
				return Config{}, fmt.Errorf("openai: backend URL %s: window %q: want a whole number of hours such as 24h", where, val)
			}
			cfg.Window = d
		default:
			return Config{}, fmt.Errorf("openai: backend URL %s: unknown parameter %q", where, k)
		}
	}
	if cfg.Window != 0 && cfg.Mode != ModeBatch {
		return Config{}, fmt.Errorf("openai: backend URL %s: window is for mode=batch only", where)
	}
	if u.Fragment != "" {
		return Config{}, fmt.Errorf("openai: backend URL %s: unexpected fragment", where)
	}
	if u.Scheme == "openai" {
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
			return Config{}, fmt.Errorf("openai: backend URL %s: openai:// takes no host or path; use openai+https://HOST/PATH", where)
		}
		cfg.Flavor, cfg.BaseURL = FlavorOpenAI, flavors[FlavorOpenAI].baseURL
		return cfg, nil
	}
	s, ok := urlSchemes[u.Scheme]
	if !ok {
		return Config{}, fmt.Errorf("openai: backend URL: unknown scheme %q", u.Scheme)
	}
	if u.Opaque != "" {
		return Config{}, fmt.Errorf("openai: backend URL %s: want %s://host:port", where, u.Scheme)
	}
	hostname, port := u.Hostname(), u.Port()
	if hostname == "" {
		if !s.defaultHost {
			return Config{}, fmt.Errorf("openai: backend URL %s: no host", where)
		}
		hostname = "127.0.0.1"
	}
	if port == "" {
		port = s.defaultPort
	}
	host := hostname
	switch {
	case port != "":
		host = net.JoinHostPort(hostname, port)
	case strings.Contains(hostname, ":"):
		host = "[" + hostname + "]"
	}
	path := u.EscapedPath()
	if path == "" || path == "/" {
		path = "/v1"
	}
	if cfg.Mode == ModeBatch && s.flavor != FlavorGeneric && s.flavor != FlavorSim {
		return Config{}, fmt.Errorf("openai: backend URL %s: %s:// has no batch API; mode=batch is for openai://, openai+http(s):// and sim+http://", where, u.Scheme)
	}
	cfg.Flavor = s.flavor
	cfg.BaseURL = s.scheme + "://" + host + path
	return cfg, nil
}
