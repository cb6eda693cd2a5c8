package jobrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/agent"
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
)

// chooseOutputs sets where the results go: the --out flag's file out, else
// the job file's; "" or "-" for stdout. Where the job has a reduce step, it
// sets where that step's output goes too: the job file's reduce output,
// else beside the results file as NAME.reduce.json, else stdout.
func (r *Run) chooseOutputs(cj *config.Job, out string) {
	r.outPath = cj.Output
	if out != "" {
		r.outPath = out
	}
	if r.outPath == "-" {
		r.outPath = ""
	}
	if red := cj.Reduce; red != nil {
		rc := red.Config
		r.reduce = &rc
		r.reduceOut = red.Output
		if r.reduceOut == "" && r.outPath != "" {
			r.reduceOut = strings.TrimSuffix(r.outPath, filepath.Ext(r.outPath)) + ".reduce.json"
		}
	}
}

// writes returns the files the run writes, for outfile.CheckFiles: its output
// (the --out flag's, else the job file's), its state file at statePath
// and its reduce output, those it has.
func (r *Run) writes(o Options, statePath string) []outfile.File {
	out := OutputFile(r.outPath, o.Out != "")
	state := outfile.File{Subject: "--state", Object: "the state file", Path: statePath, Fix: "pick another --state"}
	if o.State == "" {
		state.Subject, state.Fix = "state file", "pass --state with another name"
	}
	reduce := outfile.File{Subject: "reduce output", Object: "the reduce output", Path: r.reduceOut, Fix: "change the reduce step's output: in the job file"}
	files := []outfile.File{out, state, reduce}
	if r.outPath != "" && outfile.FormatOf(r.outPath) != outfile.JSONL {
		// A table output is written through a journal beside it.
		journal := out
		journal.Subject, journal.Object = out.Subject+" journal", out.Object+"'s journal"
		journal.Path = outfile.JournalPath(r.outPath)
		files = append(files, journal)
	}
	return files
}

// planOutput loads the run's saved states, where it has a checkpoint
// store, and, for a resumed run, checks the inputs at inPath against them
// and returns which lines of the output stay. Changed inputs are an error
// unless --force. An input whose media file (a saved state's
// agent.State.Media, hashed again now) changed or is gone is a changed
// input too. A fresh run has no plan: nil.
func (r *Run) planOutput(ctx context.Context, inPath string, resumed bool, o Options) (*outfile.Plan, error) {
	var states []agent.State
	if r.saved != nil {
		var err error
		if states, err = r.saved.Preload(ctx, r.spec.ID(), r.statePath); err != nil {
			return nil, err
		}
	}
	if r.cap != nil {
		// The cap is the whole job's: what the saved results and turns
		// cost counts.
		for i := range states {
			r.cap.AddSpent(r.price.Price.Cost(states[i].Usage))
		}
	}
	if !resumed {
		return nil, nil
	}
	in, closer, err := readInputs(inPath, r.inputTypes())
	if err != nil {
		return nil, err
	}
	chk := outfile.CheckInputs(in, states)
	closer.Close()
	if h, ok := r.spec.Def().MediaLoader.(mediaHasher); ok {
		// A changed image is a changed input, as an edited line is.
		if err := chk.CheckMedia(ctx, states, h.Hash); err != nil {
			return nil, err
		}
	}
	if chk.Changed() && !o.Force {
		return nil, chk.Err(inPath, r.statePath, r.changedHint("run the changed inputs again, replacing their results"))
	}
	return outfile.NewPlan(states, chk, o.Ordered, o.RetryFailed), nil
}

// mediaHasher hashes what a media reference names now: the job's
// *media.Loader.
type mediaHasher interface {
	Hash(ctx context.Context, ref string) (string, error)
}

// readInputs opens the inputs at path, in the format openInputs reads,
// a CSV file's columns typed by types.
func readInputs(path string, types map[string]string) (batchagent.Inputs, io.Closer, error) {
	format, err := InputFormatOf(path)
	if err != nil {
		return nil, nil, err
	}
	format = format.WithTypes(types)
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	return format.Decode(f, filepath.Base(path)), f, nil
}

// openResults opens where the results go, the output file (see
// [outfile.Open]; plan is a resumed run's) or else stdout, discards the saved
// states of the inputs whose lines plan drops, and sets up r's results
// sink to skip the lines kept. An output named .csv or .parquet is a table
// ([outfile.OpenTable]) whose output columns come from outputSchema, the
// job's output schema: its result lines go to a journal beside it, and
// the table is written from the journal when the run closes it.
func (r *Run) openResults(ctx context.Context, plan *outfile.Plan, ordered bool, outputSchema json.RawMessage) error {
	var (
		w       io.Writer = r.stdout
		written map[int]bool
	)
	if format := outfile.FormatOf(r.outPath); r.outPath != "" && format != outfile.JSONL {
		cols, err := outfile.Columns(outputSchema)
		if err != nil {
			return err
		}
		t, idx, err := outfile.OpenTable(r.outPath, format, cols, plan, r.total)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		r.closers = append(r.closers, namedCloser{"output", t})
		w, written = t, idx
	} else if r.outPath != "" {
		of, idx, err := outfile.Open(r.outPath, plan)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		r.closers = append(r.closers, namedCloser{"output", of})
		w, written = of, idx
	}
	if plan != nil {
		// Their lines are gone: discard the states of changed inputs too.
		if err := r.saved.ForgetChanged(ctx, r.spec.ID(), plan.Dropped()); err != nil {
			return fmt.Errorf("%s: %w", r.statePath, err)
		}
	}
	r.out = outfile.NewWriter(w, ordered)
	r.out.SetCost(r.price.ResultCost)
	r.out.Skip(written)
	r.resumedLines = len(written)
	return nil
}
