package estimate

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints rep as the table of `batchagent run --dry-run`: the
// inputs, the prompt's sizes, the method, the estimated calls, tokens and
// cost with their ranges, and the price they are reckoned at.
func (rep *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "dry run of %s: %d inputs in %s: %d ok, %d bad\n", rep.Job, rep.InputsOK+rep.InputsBad, rep.Inputs, rep.InputsOK, rep.InputsBad)
	fmt.Fprintf(w, "prompt: shared prefix %s tokens, sent by every call; task %s / %s / %s tokens per input (min / median / max)\n",
		thousands(int64(rep.SharedPrefixTokens)), thousands(rep.TaskTokens.Min), thousands(rep.TaskTokens.Median), thousands(rep.TaskTokens.Max))
	switch {
	case rep.Method == "sample":
		fmt.Fprintf(w, "method: sample of %d inputs run for real, evenly spread, scaled to %d inputs (median per agent; low, high: the smallest, the largest)\n", rep.Sampled, rep.InputsOK)
	default:
		how := "1 call per agent"
		switch {
		case rep.Tools && rep.CallsPerAgent.Low == rep.CallsPerAgent.High:
			how = fmt.Sprintf("%d calls per agent (tools; max_turns %d)", rep.CallsPerAgent.Low, rep.MaxTurns)
		case rep.Tools:
			how = fmt.Sprintf("%d-%d calls per agent (tools; max_turns %d)", rep.CallsPerAgent.Low, rep.CallsPerAgent.High, rep.MaxTurns)
		case rep.Pack && rep.PackAuto:
			// The counts below are those of full packs: the fewest calls.
			how = fmt.Sprintf("packing: auto, up to %d a call; chosen as the run measures (counted below at %d a call)", rep.PackSize, rep.PackSize)
		case rep.Pack:
			how = fmt.Sprintf("packed calls of up to %d agents, each sending the shared prefix once", rep.PackSize)
		}
		if rep.Pack && rep.PackVerify > 0 {
			how += fmt.Sprintf("; %g%% of packed answers checked by running their tasks alone", 100*rep.PackVerify)
		}
		fmt.Fprintf(w, "method: output schema, no model call: answers of %s-%s tokens, %s\n", thousands(rep.AnswerTokens.Low), thousands(rep.AnswerTokens.High), how)
	}
	if rep.Tokenizer != "" {
		fmt.Fprintf(w, "tokens counted by: %s\n", rep.Tokenizer)
	}
	fmt.Fprintln(w)
	row := func(name string, s Span) {
		fmt.Fprintf(w, "%-22s %14s %14s %14s\n", name, thousands(s.Estimate), thousands(s.Low), thousands(s.High))
	}
	fmt.Fprintf(w, "%-22s %14s %14s %14s\n", "", "estimate", "low", "high")
	row("calls", rep.Calls)
	row("prompt tokens", rep.PromptTokens)
	if rep.SharedPrefix != nil {
		row("  of which prefix", *rep.SharedPrefix)
	}
	if rep.CachedTokens != nil {
		row("  of which cached", *rep.CachedTokens)
	}
	if rep.MediaTokens != nil {
		row("  of which media", *rep.MediaTokens)
	}
	row("completion tokens", rep.CompletionTokens)
	if rep.Cost != nil {
		fmt.Fprintf(w, "%-22s %14s %14s %14s\n", "cost", dollars(rep.Cost.Estimate), dollars(rep.Cost.Low), dollars(rep.Cost.High))
	}
	fmt.Fprintln(w)
	if rep.Method != "sample" {
		fmt.Fprintln(w, "low, high: the run with the shortest and with the longest answers and")
		fmt.Fprintln(w, "conversations; estimate: a typical run (see batchagent help dry-run)")
	}
	if rep.Price == nil {
		fmt.Fprintln(w, rep.UnknownPrice)
		return
	}
	p := rep.Price
	of := ""
	if rep.Model != "" {
		of = " of " + rep.Model
	}
	fmt.Fprintf(w, "price%s: $%g input, $%g cached input, $%g output per million tokens (prices: %s)\n", of, p.Input, p.CachedInput, p.Output, rep.PriceSource)
	switch d := p.BatchDiscount; {
	case rep.Delivery == "batch" && rep.RealtimePrice != nil && rep.Cost != nil:
		// The cost above is at the batch price: what the same tokens would
		// cost in real time.
		f := 1 / (1 - d)
		fmt.Fprintf(w, "delivery: batch, through the provider's batch API (%g%% off); in real time the same tokens would cost %s (%s to %s)\n",
			d*100, dollars(rep.Cost.Estimate*f), dollars(rep.Cost.Low*f), dollars(rep.Cost.High*f))
	case rep.Delivery == "batch":
		fmt.Fprintln(w, "delivery: batch, through the provider's batch API (no batch price known: the cost above is at the prices shown)")
	case d > 0 && rep.Cost != nil:
		// The calls go in real time: the provider's batch price is what
		// the same tokens would cost through its batch API.
		f := 1 - d
		fmt.Fprintf(w, "delivery: realtime; through the provider's batch API (%g%% off, delivery: batch) the same tokens would cost %s (%s to %s)\n",
			d*100, dollars(rep.Cost.Estimate*f), dollars(rep.Cost.Low*f), dollars(rep.Cost.High*f))
	}
	if rep.SampleCost != nil {
		fmt.Fprintf(w, "the sample cost %s\n", dollars(*rep.SampleCost))
	}
}

// WriteBad writes the bad inputs of st as FILE:LINE: what, the first
// [BadShown], then how many more, and the count of inputs the estimate
// leaves out; nothing when no input is bad. path is the input file as
// the messages name it.
func (st *Stats) WriteBad(w io.Writer, path string) {
	for _, b := range st.Shown {
		fmt.Fprintf(w, "%s:%d: %v\n", path, b.Line, b.Err)
	}
	if more := st.Bad - len(st.Shown); more > 0 {
		fmt.Fprintf(w, "%s: and %d more bad lines\n", path, more)
	}
	if st.Bad > 0 {
		fmt.Fprintf(w, "batchagent run: %d of %d inputs are bad; the estimate covers the other %d\n", st.Bad, st.Bad+st.OK, st.OK)
	}
}

// thousands renders n with thousands separators: 1,234,567.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dollars renders a cost: two decimals from $100, six below a cent, four
// between.
func dollars(c float64) string {
	switch {
	case c >= 100:
		return fmt.Sprintf("$%.2f", c)
	case c < 0.01:
		return fmt.Sprintf("$%.6f", c)
	}
	return fmt.Sprintf("$%.4f", c)
}
