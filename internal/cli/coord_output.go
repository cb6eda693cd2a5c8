package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/batchagent/batchagent/internal/estimate"
	"github.com/batchagent/batchagent/queue"
)

// openRunOutput opens the output of a run. A new run truncates it. A
// resumed one keeps its complete lines, drops a partial last line (the
// write a killed coordinator left half done) and everything after it,
// and the lines of the indexes in drop (failed results run again), and
// adds the indexes the lines kept hold to written.
func openRunOutput(path string, resume bool, drop map[int]string, written *queue.IndexSet) (*os.File, error) {
	if !resume {
		return os.Create(path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// Lines are dropped from the middle by writing the kept ones to a new
	// file that replaces the output (its lock is a file beside it).
	var rewrite *os.File
	if len(drop) > 0 {
		if rewrite, err = os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".retry-*"); err != nil {
			f.Close()
			return nil, err
		}
		defer os.Remove(rewrite.Name()) // renamed over path unless something failed
		defer rewrite.Close()
	}
	w := bufio.NewWriterSize(rewrite, 64<<10)
	r := bufio.NewReaderSize(f, 64<<10)
	var keep int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF: a line without its newline is partial
		}
		var l struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(line, &l) != nil || l.Index == nil || *l.Index < 0 {
			break
		}
		if _, ok := drop[*l.Index]; ok {
			continue
		}
		written.Add(*l.Index)
		keep += int64(len(line))
		if rewrite != nil {
			w.Write(line)
		}
	}
	if rewrite != nil {
		f.Close()
		err := w.Flush()
		if err == nil {
			err = rewrite.Sync()
		}
		if err == nil {
			err = os.Rename(rewrite.Name(), path)
		}
		if err != nil {
			return nil, err
		}
		if f, err = os.OpenFile(path, os.O_RDWR, 0o644); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// coordLine says how far the run is, over all workers (the queue q's):
// s is the coordinator's progress; estimated the inputs counted, for the
// total until all are enqueued; the usage of the lines written this time
// is priced when the price is known.
func coordLine(ctx context.Context, q *queue.Client, name string, s queue.CoordinatorStats, estimated int, price estimate.Price) string {
	total := s.Total
	if total < 0 {
		total = estimated
	}
	alive, held := 0, 0
	if ws, err := q.Workers(ctx); err == nil {
		for _, w := range ws {
			if w.Alive {
				alive++
				held += w.Held
			}
		}
	}
	line := fmt.Sprintf("batchagent: %s: done %d/%d · enqueued %d · workers %d alive, %d agents held", name, s.Written, total, s.Enqueued, alive, held)
	if price.Known {
		line += fmt.Sprintf(" · $%.4f", price.Price.Cost(s.Usage)) // the lines written this time
	}
	return line
}

// coordProgress draws the progress line: redrawn in place on a terminal,
// else a line every 10 seconds.
type coordProgress struct {
	w     io.Writer
	tty   bool
	drawn bool
	last  time.Time
}

func newCoordProgress(w io.Writer, quiet bool) *coordProgress {
	p := &coordProgress{w: w}
	if f, ok := baseWriter(w).(*os.File); ok && !quiet {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *coordProgress) draw(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	if time.Since(p.last) >= 10*time.Second {
		p.last = time.Now()
		fmt.Fprintln(p.w, line)
	}
}

func (p *coordProgress) stop() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// writeCoordSummary prints the summary of the results a coordinator collected
// (s) in wall; the output at outPath holds s.Written lines.
func writeCoordSummary(w io.Writer, name string, wall time.Duration, s queue.CoordinatorStats, outPath string) {
	n := s.OK + s.Failed
	fmt.Fprintf(w, "batchagent: %s: %d results collected in %s (%.1f agents/s); %d in the output\n", name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), s.Written)
	fmt.Fprintf(w, "  ok %d · failed %d", s.OK, s.Failed)
	if len(s.FailedByKind) > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.FailedByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.FailedByKind[k]))
		}
		fmt.Fprintf(w, " (%s)", strings.Join(kinds, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  model calls %d · turns %d · tool calls %d · tokens: prompt %s · completion %s\n", s.ModelCalls, s.Turns, s.ToolCalls, count(s.Usage.PromptTokens), count(s.Usage.CompletionTokens))
	fmt.Fprintf(w, "  results: %s\n", outPath)
}
