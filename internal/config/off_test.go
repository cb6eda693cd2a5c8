package config_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/tool/httptool"
)

// TestParseOff checks that the word off turns each setting off, in the
// field the engine reads, that -1 still means off where old files wrote it
// (deprecated), and that a marshalled job writes off.
func TestParseOff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string // with OFF for the value
		isOff func(j *config.Job) bool
		old   []string // other spellings of off
	}{
		{"max_retries", "limits:\n  max_retries: OFF\n",
			func(j *config.Job) bool { return j.Def.NoRetries && j.Def.MaxRetries == 0 }, []string{"0"}},
		{"outage_budget", "limits:\n  outage_budget: OFF\n",
			func(j *config.Job) bool { return j.Def.NoOutageBudget && j.Engine.Admission.NoStartWindow }, nil},
		{"max_queued", "limits:\n  max_queued: OFF\n",
			func(j *config.Job) bool { return j.Engine.Admission.Backpressure.Disabled }, []string{"-1"}},
		{"cache_size", "tool_pool:\n  cache_size: OFF\n",
			func(j *config.Job) bool { return j.Def.ToolPool.CacheSize < 0 }, []string{"-1"}},
		{"max_result_bytes", "tool_pool:\n  max_result_bytes: OFF\n",
			func(j *config.Job) bool { return j.Def.ToolPool.MaxResultBytes < 0 }, []string{"-1"}},
		{"max_redirects", "tools:\n  - name: http_get\n    max_redirects: OFF\n",
			func(j *config.Job) bool { return j.Tools[0].Settings.(*httptool.Config).MaxRedirects < 0 }, []string{"-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, word := range append([]string{"off"}, tt.old...) {
				in := "task: x\n" + strings.ReplaceAll(tt.in, "OFF", word)
				j, err := config.Parse([]byte(in), "job.yaml", t.TempDir())
				if err != nil {
					t.Fatalf("Parse(%q) = %v", in, err)
				}
				if !tt.isOff(j) {
					t.Errorf("Parse(%q) = %+v, want %s off", in, j, tt.name)
				}
				out, err := yaml.Marshal(j)
				if err != nil {
					t.Fatalf("Marshal = %v", err)
				}
				if !strings.Contains(string(out), tt.name+": off") && !strings.Contains(string(out), tt.name+`: "off"`) {
					t.Errorf("Marshal(Parse(%q)) =\n%s\nwant %s: off", in, out, tt.name)
				}
				back, err := config.Parse(out, "job.yaml", t.TempDir())
				if err != nil || !tt.isOff(back) {
					t.Errorf("Parse(Marshal(Parse(%q))) = %+v, %v; want %s off", in, back, err, tt.name)
				}
			}
			for _, bad := range []string{"none", "no"} {
				in := "task: x\n" + strings.ReplaceAll(tt.in, "OFF", bad)
				if _, err := config.Parse([]byte(in), "job.yaml", t.TempDir()); err == nil || !strings.Contains(err.Error(), tt.name) {
					t.Errorf("Parse(%q) = %v, want an error naming %s", in, err, tt.name)
				}
			}
		})
	}
}

// TestBuildEveryTool builds each tool of the table from a job file: its
// settings decode into its package's config and build the tool of that
// name.
func TestBuildEveryTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkdir(t, dir, "docs")
	writeFile(t, dir, "shop.db", "")
	j, err := config.Parse([]byte(`task: x
tools:
  - {name: read_file, roots: [docs], max_bytes: 100}
  - {name: list_dir, roots: [docs], max_entries: 5, cacheable: false}
  - {name: http_get, allow_hosts: [example.com], timeout: 2s}
  - {name: sql_query, database: shop.db, max_rows: 3}
  - {name: sql_lookup, database: shop.db, table: t, key: k}
`), "job.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range j.Tools {
		built, closer, err := tl.Build()
		if err != nil {
			t.Errorf("Build(%s) = %v", tl.Name, err)
			continue
		}
		if got := built.Spec().Name; got != tl.Name {
			t.Errorf("Build(%s) built %q", tl.Name, got)
		}
		if closer != nil {
			if err := closer.Close(); err != nil {
				t.Errorf("closing %s's resource: %v", tl.Name, err)
			}
		}
		if c, ok := built.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				t.Errorf("closing %s: %v", tl.Name, err)
			}
		}
	}
	if _, _, err := (&config.Tool{Name: "web_search"}).Build(); err == nil {
		t.Error("Build(web_search) = nil error, want an unknown tool")
	}
}
