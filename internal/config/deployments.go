package config

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/router"
)

// Deployment is one deployment of a model: a backend URL among several
// that serve the same model, of a serve file's backend or of a job
// file's backend. Each call goes to the least-loaded healthy one (package
// router).
type Deployment struct {
	// Name labels the deployment in /metrics and messages. Defaults to
	// its host:port.
	Name string
	// URL is the deployment's backend URL. Required.
	URL string
	// Model overrides the model name sent upstream. Defaults to the
	// backend's (a job's model).
	Model string
	// APIKeyEnv names the variable of the deployment's key.
	APIKeyEnv string
	// Weight scales its share among equally loaded deployments. Defaults
	// to 1.
	Weight float64
	// MaxInflight, FixedInflight and RPM are its own admission. Zero
	// means the router's defaults (the backend's declared concurrency, or
	// 64; no rate cap).
	MaxInflight   int
	FixedInflight bool
	RPM           int
}

func (p *Deployment) keys() keys {
	return keys{
		{"name", &p.Name},
		{"url", &p.URL},
		{"model", &p.Model},
		{"api_key_env", &p.APIKeyEnv},
		{"weight", &p.Weight},
		{"max_inflight", &p.MaxInflight},
		{"fixed_inflight", &p.FixedInflight},
		{"rpm", &p.RPM},
	}
}

// checkDeployments reports, at n (the mapping that holds them, at path),
// a deployment without a URL, one with a negative or non-finite limit or
// weight, one whose URL asks for batch delivery (a deployment is called in
// real time), and a negative cooldown.
func (d *decoder) checkDeployments(n *yaml.Node, path string, deps []Deployment, cooldown time.Duration) {
	for i, dep := range deps {
		dp := fmt.Sprintf("%s.deployments[%d]", path, i)
		at := n
		if dn := d.nodes[dp]; dn != nil {
			at = dn
		}
		switch {
		case dep.URL == "":
			d.report(at, dp+".url", "required key is missing (the deployment's backend URL)")
		case BatchURL(dep.URL):
			d.report(at, dp+".url", "a deployment is called in real time: mode=batch needs one backend URL, not deployments")
		}
		if dep.MaxInflight < 0 || dep.RPM < 0 || !(dep.Weight >= 0) || math.IsInf(dep.Weight, 0) {
			d.report(at, dp, "weight, max_inflight and rpm must be finite and not negative (weight %v, max_inflight %d, rpm %d)", dep.Weight, dep.MaxInflight, dep.RPM)
		}
	}
	if cooldown < 0 {
		d.report(n, join(path, "cooldown"), "must not be negative")
	}
}

// OpenDeployments opens each of deps (model: the model name of those that
// name none) and returns their router, whose breakers stay open for
// cooldown (zero: the router's default). getenv reads the deployments' keys.
func OpenDeployments(ctx context.Context, deps []Deployment, model string, cooldown time.Duration, getenv func(string) string) (*router.Router, error) {
	cfg := router.Config{Cooldown: cooldown}
	names := DeploymentNames(deps)
	for i, d := range deps {
		m, err := OpenBackend(ctx, d.URL, cmp.Or(d.Model, model), d.APIKeyEnv, getenv)
		if err != nil {
			return nil, fmt.Errorf("deployments[%d]: %w", i, err)
		}
		cfg.Deployments = append(cfg.Deployments, router.Deployment{Name: names[i], Model: m, Weight: d.Weight,
			MaxInflight: d.MaxInflight, FixedInflight: d.FixedInflight, RPM: d.RPM})
	}
	return router.New(cfg)
}

// DeploymentNames returns the names of deps, in order: each one's Name,
// else its host:port, followed by #INDEX when an earlier one has the same.
func DeploymentNames(deps []Deployment) []string {
	names := make([]string, len(deps))
	seen := map[string]int{}
	for i, d := range deps {
		name := d.Name
		if name == "" {
			name = BackendAddr(d.URL)
			if seen[name]++; seen[name] > 1 {
				name = fmt.Sprintf("%s#%d", name, i)
			}
		}
		names[i] = name
	}
	return names
}

// RouterAdmission returns a, the admission of a backend over the router
// rt, as the engine's gate should hold it: the deployments admit their own
// calls, so the gate holds the rest back at their sum (or at a's own
// MaxInflight, when lower), without adapting.
func RouterAdmission(a batchagent.Admission, rt *router.Router) batchagent.Admission {
	if a.MaxInflight == 0 || a.MaxInflight > rt.MaxInflight() {
		a.MaxInflight = rt.MaxInflight()
	}
	a.FixedInflight = true
	return a
}

// DeploymentsLine describes deps in one line, for a dry run and a run's
// log: "2 deployments: a:1 (max_inflight 8), b:2".
func DeploymentsLine(deps []Deployment) string {
	names := DeploymentNames(deps)
	parts := make([]string, len(deps))
	for i, d := range deps {
		parts[i] = names[i]
		if d.MaxInflight > 0 {
			parts[i] += fmt.Sprintf(" (max_inflight %d)", d.MaxInflight)
		}
	}
	return fmt.Sprintf("%d deployments: %s", len(deps), strings.Join(parts, ", "))
}

// backendField is a job file's backend key: a backend URL, or a mapping
// of deployments and their cooldown.
//
//	backend:
//	  deployments:
//	    - {url: "http://gpu1:8000/v1", max_inflight: 64}
//	    - {url: "http://gpu2:8000/v1", max_inflight: 32, weight: 0.5}
//	  cooldown: 5s
type backendField struct{ j *Job }

func (f backendField) table() keys {
	return keys{{"deployments", &f.j.Deployments}, {"cooldown", &f.j.Cooldown}}
}

func (f backendField) decode(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		d.scalar(n, path, reflect.ValueOf(&f.j.Backend).Elem())
	case yaml.MappingNode:
		rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == "url" {
				d.problem(k, join(path, "url"), "write backend as one URL (backend: URL) or as a mapping of deployments, not both: move the URL into a deployment")
				continue
			}
			rest.Content = append(rest.Content, n.Content[i], n.Content[i+1])
		}
		before := len(d.problems)
		d.table(rest, path, f.table())
		if len(d.problems) > before {
			return // one mistake, reported once
		}
		if len(f.j.Deployments) == 0 {
			d.report(n, join(path, "deployments"), "required key is missing (a list of deployments, each with its url; or write backend as one URL)")
			return
		}
		d.checkDeployments(n, path, f.j.Deployments, f.j.Cooldown)
		for i, dep := range f.j.Deployments {
			dp := fmt.Sprintf("%s.deployments[%d].url", path, i)
			if dep.URL != "" && d.ok(dp) {
				d.checkBackendURL(dp, dep.URL)
			}
		}
		f.j.Backend = f.j.Deployments[0].URL
	default:
		d.problem(n, path, "expected a backend URL or a mapping of deployments, got %s", describe(n))
	}
}

func (f backendField) encode() (any, error) {
	if len(f.j.Deployments) == 0 {
		if f.j.Backend == "" {
			return nil, nil
		}
		return f.j.Backend, nil
	}
	n, err := encodeTable(f.table())
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	return n, nil
}

// validateDeployments checks what a job's deployments rule out: batch
// delivery, which goes through one provider account's batch API.
func (d *decoder) validateDeployments(j *Job) {
	if len(j.Deployments) == 0 || j.Delivery == nil || !j.Delivery.Batch || !d.ok("delivery") {
		return
	}
	d.report(d.at("delivery"), "delivery", "batch delivery goes through one provider account's batch API: it takes one backend URL, not backend.deployments (line %d)", d.at("backend").Line)
}
