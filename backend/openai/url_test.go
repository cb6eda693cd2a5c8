package openai_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/backend/openai"
	"github.com/batchagent/batchagent/llm"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		want    openai.Config
		wantErr string // a substring of the error; empty means no error
	}{
		{name: "openai", url: "openai://", want: openai.Config{BaseURL: "https://api.openai.com/v1", Flavor: openai.FlavorOpenAI}},
		{name: "openai with model", url: "openai://?model=gpt-4.1-mini", want: openai.Config{BaseURL: "https://api.openai.com/v1", Flavor: openai.FlavorOpenAI, Model: "gpt-4.1-mini"}},
		{name: "openai no slashes", url: "openai:", want: openai.Config{BaseURL: "https://api.openai.com/v1", Flavor: openai.FlavorOpenAI}},
		{name: "generic http keeps path", url: "openai+http://10.0.0.5:9000/api/v1", want: openai.Config{BaseURL: "http://10.0.0.5:9000/api/v1", Flavor: openai.FlavorGeneric}},
		{name: "generic http adds /v1", url: "openai+http://gpu:8000", want: openai.Config{BaseURL: "http://gpu:8000/v1", Flavor: openai.FlavorGeneric}},
		{name: "generic root path adds /v1", url: "openai+http://gpu:8000/", want: openai.Config{BaseURL: "http://gpu:8000/v1", Flavor: openai.FlavorGeneric}},
		{name: "generic https", url: "openai+https://llm.example.com/v1?model=m", want: openai.Config{BaseURL: "https://llm.example.com/v1", Flavor: openai.FlavorGeneric, Model: "m"}},
		{name: "vllm", url: "vllm://gpu1:8001", want: openai.Config{BaseURL: "http://gpu1:8001/v1", Flavor: openai.FlavorVLLM}},
		{name: "vllm default port", url: "vllm://gpu1?model=Qwen/Qwen2.5-7B-Instruct", want: openai.Config{BaseURL: "http://gpu1:8000/v1", Flavor: openai.FlavorVLLM, Model: "Qwen/Qwen2.5-7B-Instruct"}},
		{name: "vllm default host", url: "vllm://", want: openai.Config{BaseURL: "http://127.0.0.1:8000/v1", Flavor: openai.FlavorVLLM}},
		{name: "vllm port only", url: "vllm://:9000", want: openai.Config{BaseURL: "http://127.0.0.1:9000/v1", Flavor: openai.FlavorVLLM}},
		{name: "sglang default port", url: "sglang://box", want: openai.Config{BaseURL: "http://box:30000/v1", Flavor: openai.FlavorSGLang}},
		{name: "llamacpp default port", url: "llamacpp://127.0.0.1", want: openai.Config{BaseURL: "http://127.0.0.1:8080/v1", Flavor: openai.FlavorLlamaCpp}},
		{name: "llamacpp IPv6", url: "llamacpp://[::1]", want: openai.Config{BaseURL: "http://[::1]:8080/v1", Flavor: openai.FlavorLlamaCpp}},
		{name: "ollama", url: "ollama://localhost:11435?model=llama3.2", want: openai.Config{BaseURL: "http://localhost:11435/v1", Flavor: openai.FlavorOllama, Model: "llama3.2"}},
		{name: "ollama default port", url: "ollama://", want: openai.Config{BaseURL: "http://127.0.0.1:11434/v1", Flavor: openai.FlavorOllama}},
		{name: "sim", url: "sim+http://127.0.0.1:7070", want: openai.Config{BaseURL: "http://127.0.0.1:7070/v1", Flavor: openai.FlavorSim}},
		{name: "path replaces /v1", url: "vllm://gpu1:8000/proxy/v1", want: openai.Config{BaseURL: "http://gpu1:8000/proxy/v1", Flavor: openai.FlavorVLLM}},
		{name: "empty model", url: "vllm://gpu1?model=", want: openai.Config{BaseURL: "http://gpu1:8000/v1", Flavor: openai.FlavorVLLM}},
		{name: "openai batch", url: "openai://?mode=batch&model=gpt-4.1-mini", want: openai.Config{BaseURL: "https://api.openai.com/v1", Flavor: openai.FlavorOpenAI, Model: "gpt-4.1-mini", Mode: openai.ModeBatch}},
		{name: "openai batch window", url: "openai://?mode=batch&window=24h", want: openai.Config{BaseURL: "https://api.openai.com/v1", Flavor: openai.FlavorOpenAI, Mode: openai.ModeBatch, Window: 24 * time.Hour}},
		{name: "generic batch", url: "openai+https://llm.example.com/v1?mode=batch", want: openai.Config{BaseURL: "https://llm.example.com/v1", Flavor: openai.FlavorGeneric, Mode: openai.ModeBatch}},
		{name: "sim batch", url: "sim+http://127.0.0.1:7070?mode=batch", want: openai.Config{BaseURL: "http://127.0.0.1:7070/v1", Flavor: openai.FlavorSim, Mode: openai.ModeBatch}},

		{name: "vllm batch refused", url: "vllm://gpu1?mode=batch", wantErr: "vllm:// has no batch API"},
		{name: "ollama batch refused", url: "ollama://?mode=batch", wantErr: "ollama:// has no batch API"},
		{name: "unknown mode", url: "openai://?mode=bulk", wantErr: `unknown mode "bulk"`},
		{name: "window not hours", url: "openai://?mode=batch&window=90m", wantErr: `window "90m"`},
		{name: "window without batch", url: "openai://?window=24h", wantErr: "window is for mode=batch only"},

		{name: "unknown parameter", url: "vllm://gpu1?modle=x", wantErr: `unknown parameter "modle"`},
		{name: "api key parameter", url: "openai://?api_key=sk-abc", wantErr: `unknown parameter "api_key"`},
		{name: "credentials refused", url: "openai+https://user:sk-hidden@llm.example.com/v1", wantErr: "credentials"},
		{name: "unknown scheme", url: "tgi://box:80", wantErr: `unknown scheme "tgi"`},
		{name: "plain http", url: "http://box:80/v1", wantErr: `unknown scheme "http"`},
		{name: "no scheme", url: "box:80", wantErr: "unknown scheme"},
		{name: "openai with host", url: "openai://api.example.com", wantErr: "openai:// takes no host"},
		{name: "sim needs a host", url: "sim+http://", wantErr: "no host"},
		{name: "generic needs a host", url: "openai+http:///v1", wantErr: "no host"},
		{name: "fragment", url: "vllm://gpu1#frag", wantErr: "fragment"},
		{name: "bad escape", url: "vllm://gpu1?model=%zz", wantErr: "query"},
		{name: "not a URL", url: "vllm://gpu1:port", wantErr: "openai: backend URL"},
		{name: "opaque", url: "vllm:gpu1", wantErr: "want vllm://host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := openai.ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want an error containing %q", tt.url, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk-") {
					t.Errorf("ParseURL(%q) error %q repeats a credential", tt.url, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q) = %v", tt.url, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) (-want +got):\n%s", tt.url, diff)
			}
			if _, err := openai.New(got); err != nil {
				t.Errorf("New(ParseURL(%q)) = %v", tt.url, err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	mediaAll := llm.Media{Image: true, ImageURL: true, Audio: true, File: true, FileID: true, Billing: "openai"}
	verbatim := llm.ExtraFields{Verbatim: true} // every flavor forwards extra fields as they came
	mediaImages := llm.Media{Image: true, ImageURL: true, Billing: "openai"}
	tests := []struct {
		name    string
		cfg     openai.Config
		want    llm.Capabilities
		wantErr string
	}{
		{name: "openai default address", cfg: openai.Config{Flavor: openai.FlavorOpenAI},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, DefaultConcurrency: 8, Media: mediaAll}},
		{name: "generic", cfg: openai.Config{BaseURL: "http://h/v1"},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, DefaultConcurrency: 16, Media: mediaImages}},
		{name: "generic with metrics", cfg: openai.Config{BaseURL: "http://h/v1", MetricsURL: "http://h:9090/metrics"},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, QueueProbe: true, DefaultConcurrency: 16, Media: mediaImages}},
		{name: "vllm", cfg: openai.Config{Flavor: openai.FlavorVLLM},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, QueueProbe: true, DefaultConcurrency: 64, Media: mediaImages}},
		{name: "sglang", cfg: openai.Config{Flavor: openai.FlavorSGLang},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, QueueProbe: true, DefaultConcurrency: 64, Media: mediaImages}},
		{name: "llamacpp", cfg: openai.Config{Flavor: openai.FlavorLlamaCpp},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, QueueProbe: true, DefaultConcurrency: 8, Media: mediaImages}},
		{name: "ollama", cfg: openai.Config{Flavor: openai.FlavorOllama},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, DefaultConcurrency: 4, Media: llm.Media{Image: true, Billing: "openai"}}},
		{name: "sim", cfg: openai.Config{Flavor: openai.FlavorSim, BaseURL: "http://127.0.0.1:7070/v1"},
			want: llm.Capabilities{Extra: llm.ExtraFields{Verbatim: true, OneChoice: true}, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, QueueProbe: true, DefaultConcurrency: 64, Media: mediaAll}},
		{name: "concurrency override", cfg: openai.Config{Flavor: openai.FlavorVLLM, Concurrency: 200},
			want: llm.Capabilities{Extra: verbatim, Streaming: true, NativeTools: true, NativeJSONSchema: true, PromptCaching: true, QueueProbe: true, DefaultConcurrency: 200, Media: mediaImages}},

		{name: "zero config", cfg: openai.Config{}, wantErr: "BaseURL is required"},
		{name: "sim needs BaseURL", cfg: openai.Config{Flavor: openai.FlavorSim}, wantErr: "BaseURL is required"},
		{name: "unknown flavor", cfg: openai.Config{Flavor: "tgi", BaseURL: "http://h/v1"}, wantErr: `unknown flavor "tgi"`},
		{name: "bad scheme", cfg: openai.Config{BaseURL: "ftp://h/v1"}, wantErr: `scheme "ftp"`},
		{name: "relative", cfg: openai.Config{BaseURL: "/v1"}, wantErr: "scheme"},
		{name: "no host", cfg: openai.Config{BaseURL: "http:///v1"}, wantErr: "no host"},
		{name: "credentials", cfg: openai.Config{BaseURL: "http://u:sk-pass@h/v1"}, wantErr: "credentials"},
		{name: "query", cfg: openai.Config{BaseURL: "http://h/v1?x=1"}, wantErr: "query"},
		{name: "key in the query", cfg: openai.Config{BaseURL: "http://h/v1?key=sk-pass"}, wantErr: "http://h has a query"},
		{name: "key in the fragment", cfg: openai.Config{BaseURL: "http://h/v1#sk-pass"}, wantErr: "fragment"},
		{name: "credentials in an unparsable URL", cfg: openai.Config{BaseURL: "http://u:sk-pass@h:port/v1"}, wantErr: "BaseURL"},
		{name: "key in the metrics URL", cfg: openai.Config{BaseURL: "http://h/v1", MetricsURL: "http://u:sk-pass@h:9090/metrics"}, wantErr: "MetricsURL"},
		{name: "bad metrics URL", cfg: openai.Config{BaseURL: "http://h/v1", MetricsURL: "h:9090"}, wantErr: "MetricsURL"},
		{name: "negative concurrency", cfg: openai.Config{BaseURL: "http://h/v1", Concurrency: -1}, wantErr: "negative"},
		{name: "unparsable", cfg: openai.Config{BaseURL: "http://h:port/v1"}, wantErr: "BaseURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := openai.New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "sk-pass") {
					t.Errorf("New error %q repeats a credential", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v) = %v", tt.cfg, err)
			}
			if diff := cmp.Diff(tt.want, m.Capabilities()); diff != "" {
				t.Errorf("Capabilities() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigRedactsAPIKey(t *testing.T) {
	t.Parallel()
	cfg := openai.Config{BaseURL: "http://h/v1", APIKey: "sk-live-abcdef123456", HTTPClient: &http.Client{}}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, cfg); strings.Contains(s, "sk-live") || strings.Contains(s, "abcdef123456") {
			t.Errorf("Sprintf(%q, cfg) = %s, leaks the API key", format, s)
		}
	}
	m := newModel(t, cfg)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, m); strings.Contains(s, "abcdef123456") {
			t.Errorf("Sprintf(%q, model) = %s, leaks the API key", format, s)
		}
	}
	if s := fmt.Sprintf("%+v", *m); strings.Contains(s, "abcdef123456") {
		t.Errorf("Sprintf(%%+v, model) leaks the API key: %s", s)
	}
}
