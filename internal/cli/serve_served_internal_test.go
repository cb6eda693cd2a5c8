package cli

import (
	"bytes"
	"testing"

	"github.com/batchagent/batchagent/internal/config"
)

// TestWriteServedDeployments: a model over several deployments is printed
// with each deployment's scheme://host:port (never its path or key) and
// its own upstream model.
func TestWriteServedDeployments(t *testing.T) {
	sc, err := config.ParseServe([]byte(`backends:
  gpt:
    model: gpt-4o-mini
    deployments:
      - {url: "openai+https://eu.example.com/v1?key=secret", api_key_env: EU_KEY}
      - {url: "openai+https://us.example.com/v1", model: gpt-4o-mini-us}
`), "serve.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	writeServed(&buf, sc, "/data")
	want := `  model "gpt": passthrough to the least-loaded of openai+https://eu.example.com model "gpt-4o-mini", openai+https://us.example.com model "gpt-4o-mini-us"
  batch API: /v1/files, /v1/batches (data in /data)
`
	if got := buf.String(); got != want {
		t.Errorf("writeServed =\n%s\nwant\n%s", got, want)
	}
}
