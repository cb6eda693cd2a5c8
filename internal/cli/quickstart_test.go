package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// quickstartMarker opens the README's quick start: the fenced block after
// it is what TestReadmeQuickstart runs.
const quickstartMarker = "<!-- quickstart"

// quickstartCommands returns the commands of the README's quick start,
// one a line, from the first ```sh block after quickstartMarker.
func quickstartCommands(t *testing.T, readme string) []string {
	t.Helper()
	_, after, ok := strings.Cut(readme, quickstartMarker)
	if !ok {
		t.Fatalf("README.md has no %q marker before its quick start", quickstartMarker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("README.md: no ```sh block after the quick-start marker")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md: the quick-start block is not closed")
	}
	var cmds []string
	for l := range strings.SplitSeq(block, "\n") {
		if strings.TrimSpace(l) != "" {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// documentedExit is the exit status a quick-start line's comment states
// ("# exit 124: …"), else 0.
var documentedExit = regexp.MustCompile(`#\s*exit (\d+)`)

// firstSummary finds the count of results of the interrupted run's summary.
var firstSummary = regexp.MustCompile(`quickstart: (\d+) results in`)

// TestReadmeQuickstart runs every command of the README's quick start, as
// written, in one bash session started at the repository's root, with
// `batchagent` on PATH and TMPDIR a fresh test directory (so that its
// `cd "$(mktemp -d)"` lands there). Each command must exit with the status
// its comment documents (0 unless it says "# exit N"), the resumed run
// must say it resumed, the output must hold one result per input of
// examples/quickstart/reviews.csv, and the repository must gain no file.
// `batchagent` is this test binary, which runs the CLI when BATCHAGENT_CLI_CHILD
// is set (see TestMain): no second build of the module.
func TestReadmeQuickstart(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash:", err)
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout (GNU coreutils):", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := quickstartCommands(t, string(readme))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := "#!/usr/bin/env bash\n" +
		"if [ $# -eq 0 ]; then set -- help; fi\n" +
		"IFS=$'\\x1f'\n" +
		"BATCHAGENT_CLI_CHILD=\"$*\" exec " + strconv.Quote(self) + "\n"
	if err := os.WriteFile(filepath.Join(bin, "batchagent"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	before := repoFiles(t, root)

	// One script: each command, then a marker with its status and the
	// directory it left, so that `cd` and variables carry on as in a shell.
	var script strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&script, "%s\necho \"@@ %d $? $PWD\"\n", c, i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quick start's script: %v\n%s", err, out)
	}
	text := string(out)
	status := map[int]int{}
	var dir string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var i, code int
		var d string
		if n, _ := fmt.Sscanf(sc.Text(), "@@ %d %d %s", &i, &code, &d); n == 3 {
			status[i], dir = code, d
		}
	}
	for i, c := range cmds {
		want := 0
		if m := documentedExit.FindStringSubmatch(c); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		got, ok := status[i]
		if !ok || got != want {
			t.Errorf("quick start command %d %q: exit %d (ran: %v), want %d", i+1, c, got, ok, want)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", text)
	}
	if !strings.HasPrefix(dir, tmp) {
		t.Fatalf("the quick start ended in %s, want a folder under TMPDIR %s", dir, tmp)
	}
	inputs := countLines(t, filepath.Join(root, "examples", "quickstart", "reviews.csv")) - 1 // the header
	results := readLines(t, readFileString(t, filepath.Join(dir, "results.jsonl")))
	if len(results) != inputs {
		t.Errorf("results.jsonl holds %d lines, want %d (one per input)", len(results), inputs)
	}
	seen := map[int]bool{}
	for _, r := range results {
		if r.Error != nil || r.Output == nil {
			t.Errorf("result %d: error %+v, output %v; want an output", r.Index, r.Error, r.Output)
		}
		if seen[r.Index] {
			t.Errorf("result %d is written twice", r.Index)
		}
		seen[r.Index] = true
	}
	// The interrupted run's results are kept by the resumed one, which says
	// so (on a machine too slow to finish one in the first run's seconds,
	// there is nothing to keep and nothing to say).
	if m := firstSummary.FindStringSubmatch(text); m == nil {
		t.Errorf("no summary of the interrupted run:\n%s", text)
	} else if m[1] != "0" && !strings.Contains(text, "(resumed: "+m[1]+" results were already in the output)") {
		t.Errorf("the interrupted run wrote %s results; the second does not say it resumed with them:\n%s", m[1], text)
	}
	if !strings.Contains(text, fmt.Sprintf("\n%d results.jsonl", inputs)) {
		t.Errorf("wc -l does not print %d, as the README says:\n%s", inputs, text)
	}
	for _, c := range cmds { // the count the README promises is the inputs'
		if strings.HasPrefix(c, "wc -l") && !strings.Contains(c, fmt.Sprintf("# %d:", inputs)) {
			t.Errorf("README's %q does not promise %d lines (reviews.csv's inputs)", c, inputs)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || fi.Size() == 0 {
		t.Errorf("report.html: %v, want a page", err)
	}
	if after := repoFiles(t, root); after != before {
		t.Errorf("the quick start changed the repository's files:\nbefore %s\nafter  %s", before, after)
	}
}

// repoFiles lists the files of the repository that git does not track and
// does not ignore, the ones a stray command would leave.
func repoFiles(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		t.Skipf("git status: %v", err)
	}
	return string(out)
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	return strings.Count(strings.TrimRight(readFileString(t, path), "\n"), "\n") + 1
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
