package batchagent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces the dependency direction of STYLE.md (B1): each
// package may import only the listed packages of this module.
func TestImportRules(t *testing.T) {
	const mod = "github.com/batchagent/batchagent"
	allowed := map[string][]string{
		"": {"admission", "job", "input", "llm", "agent", "sched", "tool", "schema", "internal/engine"},
		// The admission of model calls to each backend: its settings, turned
		// into sched's gate for a backend's llm.Model.
		"admission":     {"job", "llm", "sched"},
		"llm":           {},
		"sched":         {},
		"tool":          {"llm"}, // llm: a MediaTool's results carry llm.Part media
		"tool/sqltool":  {"tool"},
		"tool/filetool": {"tool", "llm", "internal/media"}, // read_file returns images and PDFs as media parts
		"tool/httptool": {"tool", "internal/netguard"},
		"checkpoint":    {"agent", "job", "llm", "jsonenc", "internal/groupcommit"},
		// One writer that commits queued records in groups, for the checkpoint
		// and the Batch API's store.
		"internal/groupcommit": {},
		// The cross-run cache of model answers, in SQLite: an llm.Model
		// wrapper.
		"respcache": {"llm"},
		// One model name over several deployments: an llm.Model that picks
		// the least-loaded healthy one (its own admission and breaker).
		"router": {"llm"},
		// The Batch API: files, batches and their store; the gateway mounts
		// it and runs its lines.
		"server/batchapi":    {"internal/groupcommit", "internal/oaiwire"},
		"queue":              {"", "agent", "job", "llm", "sched", "respcache"}, // respcache: the response cache's Store in Redis
		"tool/mcptool":       {"tool"},
		"schema":             {},
		"internal/sse":       {},
		"internal/retry":     {"llm"},
		"internal/engine":    {"admission", "agent", "job", "llm", "sched", "schema", "tool", "internal/retry", "internal/pack"},
		"internal/pack":      {},
		"internal/redistest": {},
		// The live tests against a real inference server: test files only.
		"internal/livetest": {},
		// Never sched, the engine nor any internal package
		// (TestJobImportsNoAdmission, TestOnlyMainImportsCLI).
		"job": {"llm", "schema", "tool", "jsonenc"},
		// JSON appenders without reflection, for the records written once
		// per agent (checkpoint states, result lines).
		"jsonenc":     {},
		"input":       {"job"},
		"agent":       {"llm", "job", "tool", "schema", "internal/retry", "internal/media"}, // media: tool results' media tokens in compaction estimates
		"backend/sim": {"llm", "internal/sse", "internal/retry", "backend/sim/internal/gen", "internal/pack", "internal/media"},
		// Media: sniffing types and sizes, data: URLs, the tokens
		// providers bill for images, documents and audio.
		"internal/media":      {"llm", "internal/netguard"}, // the loader fetches URLs through http_get's guard
		"internal/netguard":   {},
		"backend/openai":      {"llm", "internal/sse", "internal/retry", "jsonenc", "internal/oaiwire", "backend/batchmode"}, // batchmode: the Batch API provider; jsonenc: request bodies without the SDK's reflection
		"backend/anthropic":   {"llm", "internal/sse", "internal/retry", "internal/media", "backend/batchmode"},
		"backend/bedrock":     {"llm", "internal/sse", "internal/retry", "internal/media"},
		"backend/batchmode":   {"llm", "respcache"}, // the batch-round Model and the Provider a backend's batch API implements
		"backend/backendtest": {"llm"},
		"internal/tokens":     {"llm"},
		"internal/prices":     {"llm"},
		// Charts of a run: the engine's Stats sampled live, or a checkpoint
		// store's states and samples read back.
		"internal/report": {"", "agent", "checkpoint", "job", "llm", "tool"},
		// Metrics over the engine's Stats and results; spans from the
		// agent's Observer.
		"internal/telemetry": {"", "agent", "llm", "internal/retry"}, // retry: the OTLP client's back-off and Retry-After
		// The command's own packages may import any package but each other
		// upward: cli wires config, bench and the backends; config decodes
		// job files into the library's types and builds the tools.
		"internal/bench": {"", "server/batchapi", "backend/openai", "backend/sim", "backend/sim/simhttp", "checkpoint",
			"internal/outfile", "job", "llm", "schema", "server", "tool", "tool/filetool"},
		// The results file: writing, locks, reconciliation on resume with the
		// checkpoint store, status JSON.
		"internal/outfile": {"", "agent", "checkpoint", "input", "internal/progress", "llm"},
		// One progress display (run, the coordinator, the OpenAI-batch mode).
		"internal/progress": {"llm"},
		// `run --openai-batch`: a job's requests through the Batch API.
		"internal/openaibatch": {"llm", "server"},
		// The dry run: a job's calls, tokens and cost over its inputs.
		// The simulators: a dry run on sim:// or sim+http:// counts tokens
		// as the simulator it will run on does.
		"internal/estimate": {"", "agent", "backend/sim", "backend/sim/simhttp", "input", "internal/config", "internal/media", "internal/prices", "internal/tokens", "llm"}, // media: the inputs' media tokens as the backend bills them
		"internal/config":   {"", "backend/anthropic", "backend/batchmode", "backend/bedrock", "backend/openai", "backend/sim", "server/batchapi", "internal/prices", "internal/telemetry", "internal/tokens", "job", "llm", "reduce", "router", "schema", "server", "tool", "tool/filetool", "tool/httptool", "tool/mcptool", "tool/sqltool"},
		// The run of a job file (`batchagent run` without its flags):
		// open the job, inputs, output and state; stream, summarise.
		"internal/jobrun": {"", "agent", "backend/batchmode", "checkpoint", "input", "internal/config", "internal/estimate", "internal/media", "internal/outfile",
			"internal/progress", "internal/report", "internal/telemetry", "internal/tokens", "job", "llm", "reduce", "respcache", "tool",
			"internal/prices", "internal/spend", "router"}, // router: a job's deployments, their stats in the summary
		// The spend cap (limits.max_cost): a wrapper of llm.Model.
		"internal/spend": {"job", "llm"},
		// Commands and flags: each reads its flags, calls one package and
		// prints.
		"internal/cli": {"", "server/batchapi", "backend/sim", "backend/sim/simhttp", "checkpoint", "internal/bench", "internal/config",
			"internal/estimate", "internal/jobrun", "internal/openaibatch", "internal/prices", "internal/progress", "internal/outfile", "internal/report", "internal/spend",
			"internal/telemetry", "llm", "queue", "server"},
		"cmd/batchagent": {"internal/cli"},

		// The simulator's HTTP server wraps the in-process model; the value
		// generator is internal to the two.
		"backend/sim/simhttp":      {"llm", "backend/sim", "backend/sim/internal/gen", "internal/oaiwire", "server/batchapi"}, // batchapi: the simulator's Batch API
		"backend/sim/internal/gen": {},

		// Satellite packages are built on the root's public API; the root
		// never imports them.
		"reduce": {""},
		// The gateway serves the engine (and agents' progress through
		// agent.Observer) over OpenAI's wire format.
		"server": {"", "agent", "server/batchapi", "llm", "internal/oaiwire", "internal/prices", "internal/spend"}, // prices, spend: the per-key spend cap
		// OpenAI's chat-completions wire format: requests, answers, chunks and
		// error bodies, for the gateway, the simulator and the OpenAI backend.
		"internal/oaiwire": {"llm", "jsonenc", "internal/media"}, // the one strict data: URL reader

		// The Checkpointer conformance suite runs a job on the simulator.
		"checkpoint/checkpointtest": {"", "agent", "job", "llm", "schema", "tool", "backend/sim"},

		// The game-loop example of fallback tiers, on the simulator.
		"examples/npc-planner": {"", "backend/sim", "llm"},
		// bench fair's workload as a library user's program.
		"examples/fair-library": {"", "backend/sim", "tool", "tool/filetool"},
		// A worker and a coordinator in a library user's own process.
		"examples/scaleout-library": {"", "backend/sim", "queue"},
	}
	// Outside this module, these packages import only the standard library
	// and golang.org/x: the built-in tools and the simulator cost library
	// users nothing more.
	stdOnly := map[string]bool{"tool/filetool": true, "tool/httptool": true,
		"backend/sim/simhttp": true, "backend/sim/internal/gen": true}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		rules, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %q has no import rule: add it to STYLE.md's list and this test", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if imp != mod && !strings.HasPrefix(imp, mod+"/") {
				first, _, _ := strings.Cut(imp, "/")
				if stdOnly[pkg] && strings.Contains(first, ".") && !strings.HasPrefix(imp, "golang.org/x/") {
					t.Errorf("%s imports %s: it may import only the standard library, golang.org/x and this module", fields[0], imp)
				}
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
			found := false
			for _, r := range rules {
				found = found || r == dep
			}
			if !found {
				t.Errorf("%s imports %s, which STYLE.md's import rules do not allow", fields[0], imp)
			}
		}
	}
}

// TestSuitesImportedOnlyByTests enforces STYLE.md's rule that packages
// ending in "test" (the conformance suites backendtest and checkpointtest)
// are imported only from _test.go files: no package's own code may import
// one, so the testing package never reaches a library user's binary.
func TestSuitesImportedOnlyByTests(t *testing.T) {
	const mod = "github.com/batchagent/batchagent"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	suites := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if strings.HasSuffix(fields[0], "test") {
			suites++
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, mod+"/") && strings.HasSuffix(imp, "test") {
				t.Errorf("%s imports the test suite %s outside its _test.go files", fields[0], imp)
			}
		}
	}
	if suites < 2 {
		t.Errorf("found %d packages ending in \"test\", want backendtest and checkpointtest at least: is the rule still checked?", suites)
	}
}

// TestJobImportsNoAdmission enforces issue 28's rule that job, the
// vocabulary of a job and its results, depends on no admission or engine
// code, even indirectly: neither sched nor an internal package.
func TestJobImportsNoAdmission(t *testing.T) {
	const mod = "github.com/batchagent/batchagent"
	out, err := exec.Command("go", "list", "-deps", mod+"/job").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if dep == mod+"/sched" || strings.HasPrefix(dep, mod+"/internal/") {
			t.Errorf("job depends on %s: it may depend on neither sched nor internal packages", dep)
		}
	}
}

// TestOnlyMainImportsCLI enforces issue 28's rule that internal/cli holds
// the commands and nothing else: no package but cmd/batchagent imports it,
// not even from its tests (a concept a test needs lives in its own
// package), and job imports neither sched nor an internal package.
func TestOnlyMainImportsCLI(t *testing.T) {
	const mod = "github.com/batchagent/batchagent"
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		for _, imp := range fields[1:] {
			switch {
			case imp == mod+"/internal/cli" && pkg != mod+"/internal/cli":
				importers++
				if pkg != mod+"/cmd/batchagent" {
					t.Errorf("%s imports internal/cli: only cmd/batchagent may", pkg)
				}
			case pkg == mod+"/job" && (imp == mod+"/sched" || strings.HasPrefix(imp, mod+"/internal/")):
				t.Errorf("job imports %s: it may import neither sched nor internal packages", imp)
			}
		}
	}
	if importers != 1 {
		t.Errorf("found %d importers of internal/cli, want 1 (cmd/batchagent): is the rule still checked?", importers)
	}
}
