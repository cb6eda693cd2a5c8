package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/internal/config"
)

func TestParseCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name, yaml string
		want       *config.CacheConfig
	}{
		{"absent", ``, nil},
		{"off", "cache: off\n", &config.CacheConfig{Off: true}},
		{"empty", "cache: {}\n", &config.CacheConfig{}},
		{"set", "cache: {path: answers.db, ttl: 720h, nondeterministic: true}\n",
			&config.CacheConfig{Path: filepath.Join(dir, "answers.db"), TTL: 720 * time.Hour, Nondeterministic: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := config.Parse([]byte("task: hi\n"+c.yaml), "job.yaml", dir)
			if err != nil {
				t.Fatal(err)
			}
			if (j.Cache == nil) != (c.want == nil) || j.Cache != nil && *j.Cache != *c.want {
				t.Fatalf("Cache = %+v, want %+v", j.Cache, c.want)
			}
			// It writes back as it reads.
			out, err := yaml.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			back, err := config.Parse(out, "job.yaml", dir)
			if err != nil {
				t.Fatalf("%s\nparses back with error %v", out, err)
			}
			if (back.Cache == nil) != (c.want == nil) || back.Cache != nil && *back.Cache != *c.want {
				t.Errorf("written as\n%s\nreads back as %+v, want %+v", out, back.Cache, c.want)
			}
		})
	}
}

func TestParseCacheErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"cache: on\n", `cache: expected off or a mapping`},
		{"cache: {ttl: -1h}\n", "cache.ttl: must not be negative"},
		{"cache: {size: 3}\n", "size"},
	} {
		_, err := config.Parse([]byte("task: hi\n"+c.yaml), "job.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
}
