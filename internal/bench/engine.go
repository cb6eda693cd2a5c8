package bench

import (
	"context"

	"github.com/batchagent/batchagent"
)

// stream runs d over inputs on a new engine with cfg, passing each result
// to each, and returns the engine's counters once the run has ended.
func stream(ctx context.Context, cfg batchagent.Config, d batchagent.Def, inputs batchagent.Inputs, each func(batchagent.Result) error) (batchagent.Stats, error) {
	spec, err := batchagent.NewSpec(d)
	if err != nil {
		return batchagent.Stats{}, err
	}
	eng, err := batchagent.New(cfg)
	if err != nil {
		return batchagent.Stats{}, err
	}
	seq, err := eng.Stream(ctx, spec, inputs)
	if err != nil {
		return batchagent.Stats{}, err
	}
	for r := range seq {
		if err := each(r); err != nil {
			return eng.Stats(), err
		}
	}
	return eng.Stats(), nil
}
