package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// FallbackBackend is one fallback tier of a job file: a backend the CLI
// opens, as it opens the job's own backend, into a job.Fallback's Model.
// A job's agents fall back to its tiers in order when the tier before
// failed on its backend or their time budget (limits.budget) ran out.
//
//	fallbacks:
//	  - backend: openai://
//	    model: gpt-4o-mini
//	    api_key_env: OPENAI_FALLBACK_KEY
//	  - backend: sim://
type FallbackBackend struct {
	// Backend is the backend URL, as the job's backend. Required.
	Backend string
	// Model is the model name passed to the backend (job.Fallback's
	// ModelName). Defaults to "" (the backend's default model).
	Model string
	// APIKeyEnv names the environment variable holding the backend's API
	// key, as the job's api_key_env. Empty means the backend's usual one.
	APIKeyEnv string
}

func (f *FallbackBackend) keys() keys {
	return keys{{"backend", &f.Backend}, {"model", &f.Model}, {"api_key_env", &f.APIKeyEnv}}
}

// validateFallbacks checks the fallback tiers and the time budget that
// only they use.
func (d *decoder) validateFallbacks(j *Job) {
	for i, f := range j.Fallbacks {
		path := fmt.Sprintf("fallbacks[%d]", i)
		switch bp := path + ".backend"; {
		case !d.ok(bp):
		case f.Backend == "":
			msg := "required key is missing"
			if d.nodes[bp] != nil {
				msg = "must not be empty"
			}
			d.report(d.at(bp), bp, "%s (a backend URL, such as \"sim://\")", msg)
		default:
			d.checkBackendURL(bp, f.Backend)
		}
	}
	const bp = "limits.budget"
	if n := d.nodes[bp]; n == nil || isNull(n) || !d.ok(bp) {
		return
	}
	switch {
	case j.Def.Budget <= 0:
		d.report(d.at(bp), bp, "must be positive, got %s", j.Def.Budget)
	case len(j.Fallbacks) == 0:
		d.report(d.at(bp), bp, "budget without fallbacks has no effect: list fallbacks to answer from once it runs out, or bound each agent with limits.timeout")
	}
}

// checkBackendURL reports at path a backend URL that does not parse, has
// no scheme, or has one OpenBackend does not know (with the nearest one
// for a misspelling). No report holds the URL's user info or query.
func (d *decoder) checkBackendURL(path, raw string) {
	if u, err := url.Parse(raw); err != nil {
		d.report(d.at(path), path, "invalid backend URL: %v", errors.Unwrap(err))
	} else if u.Scheme == "" {
		// Without its user info, query or fragment, where a key may be.
		shown := (&url.URL{Host: u.Host, Path: u.Path}).String()
		d.report(d.at(path), path, "backend URL %s has no scheme (for example \"sim://\" or \"openai://\")", quote(shown))
	} else if !slices.Contains(schemes, u.Scheme) {
		d.report(d.at(path), path, "%s", strings.TrimPrefix(unsupported(u).Error(), "backend: "))
	}
}
