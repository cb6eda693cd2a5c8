package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"
)

// progressFields match what the live progress line draws: the bar, the
// percentage with done of total, the ETA.
var (
	progressPercent = regexp.MustCompile(`\b\d{1,3}% \d+/\d+\b`)
	progressETA     = regexp.MustCompile(`\bETA \d`)
	progressBar     = regexp.MustCompile(`\[[=>-]`)
)

// TestProgressInTmux runs a real `batchagent run` (this test binary
// re-executed as the CLI, see TestMain) on the simulator inside tmux, at
// 60, 80 and 200 columns: while it runs, the screen shows the percentage
// and the ETA and no line wraps; after Ctrl-C (tmux send-keys C-c, which
// the terminal turns into SIGINT) the run stops gracefully, no fragment
// of the progress line is left on the screen, and the summary fits the
// width without wrapping.
func TestProgressInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed, and CI must run this test (scripts/test installs it)")
		}
		t.Skip("tmux is not installed (apt-get install -y tmux, as scripts/test does): skipping the terminal test")
	}
	for _, cols := range []int{60, 80, 200} {
		t.Run(fmt.Sprintf("%d columns", cols), func(t *testing.T) {
			t.Parallel()
			progressInTmux(t, tmux, cols)
		})
	}
}

// progressInTmux is TestProgressInTmux at one width.
func progressInTmux(t *testing.T, tmux string, cols int) {
	dir, job := newJob(t, "limits:\n  max_inflight: 8\npricing: {input: 3, output: 15}\n")
	var in strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&in, "{\"id\":%d}\n", i)
	}
	writeFile(t, dir, "in.jsonl", in.String())
	// Paths as a user types them, relative to the directory run in.
	args := []string{"run", filepath.Base(job), "--inputs", "in.jsonl", "--out", "out.jsonl", "--backend", "sim://?seed=3&latency=100ms"}
	writeFile(t, dir, "args", strings.Join(args, "\x1f"))
	// The pane shows the command as a shell would (so that, as in a
	// shell, the live line is not on the screen's first row), runs the
	// CLI in dir, then says how it exited and stays open. The shell traps SIGINT (Ctrl-C reaches the whole foreground
	// group) so as to outlive the CLI; the CLI gets it as usual.
	script := writeFile(t, dir, "run.sh", fmt.Sprintf("#!/bin/sh\ntrap true INT\ncd %s || exit 1\necho '$ batchagent run job.yaml'\n%s=\"$(cat args)\" %s\necho EXIT=$?\nsleep 120\n",
		dir, childEnv, os.Args[0]))
	sock := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A pane whose shell ends stays, saying so, rather than ending the
	// server.
	conf := writeFile(t, dir, "tmux.conf", "set -g remain-on-exit on\n")
	tm("-f", conf, "new-session", "-d", "-x", fmt.Sprint(cols), "-y", "40", "sh", script)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	// What the CLI writes to the terminal, escape sequences and all, as
	// the pane received it: logged when the test fails.
	raw := filepath.Join(dir, "pane.log")
	tm("pipe-pane", "-t", "0", "-o", "cat >> "+raw)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(raw)
			if i := strings.Index(string(b), "^C"); i >= 0 {
				b = b[max(i-600, 0):min(i+400, len(b))]
			}
			t.Logf("%d columns: the bytes the pane received around Ctrl-C:\n%q", cols, b)
		}
	})
	// screen is the pane as shown, lines wrapped by the terminal joined
	// again (-J), so that a wrapped line reads as one wider than cols.
	screen := func() []string {
		t.Helper()
		var lines []string
		for l := range strings.SplitSeq(tm("capture-pane", "-p", "-J", "-t", "0"), "\n") {
			if l = strings.TrimRight(l, " "); l != "" {
				lines = append(lines, l)
			}
		}
		return lines
	}
	wait := func(what string, ok func([]string) bool) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			lines := screen()
			if ok(lines) {
				return lines
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d columns: no %s after 20s; screen:\n%s", cols, what, strings.Join(lines, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	running := wait("progress line with a percentage and an ETA", func(lines []string) bool {
		for _, l := range lines {
			if progressPercent.MatchString(l) && progressETA.MatchString(l) {
				return true
			}
		}
		return false
	})
	for _, l := range running {
		if w := runewidth.StringWidth(l); w > cols {
			t.Errorf("%d columns: a line of %d columns wraps: %q", cols, w, l)
		}
	}
	tm("send-keys", "-t", "0", "C-c")
	done := wait("exit", func(lines []string) bool { return len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "EXIT=") })
	text := strings.Join(done, "\n")
	if !strings.Contains(text, "EXIT=130") || !strings.Contains(text, "stopping: finishing the turns in flight") || !strings.Contains(text, "interrupted: ") {
		t.Errorf("%d columns: want a graceful stop, its summary and exit status 130; screen:\n%s", cols, text)
	}
	for _, l := range done {
		switch {
		case progressPercent.MatchString(l) || progressETA.MatchString(l) || strings.Contains(l, "agents/s ·"):
			t.Errorf("%d columns: the progress line is left after Ctrl-C: %q\nscreen:\n%s", cols, l, text)
		case progressBar.MatchString(l):
			// The start of a frame: the terminal echoes "^C" where the
			// cursor is, below the live line, and a redraw or erase that
			// does not return to column 0 first leaves the line's first
			// columns ("[-").
			t.Errorf("%d columns: a fragment of the progress line is left after Ctrl-C: %q\nscreen:\n%s", cols, l, text)
		}
		if w := runewidth.StringWidth(l); w > cols {
			t.Errorf("%d columns: a line of %d columns wraps: %q", cols, w, l)
		}
	}
	t.Logf("%d columns, while running:\n%s\n\nafter Ctrl-C:\n%s", cols, strings.Join(running, "\n"), text)
}
