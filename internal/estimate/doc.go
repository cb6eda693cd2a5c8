// Package estimate holds the dry run: what a job would cost over its
// inputs without running it.
//
// A [Job] reads every input lazily ([Job.Scan]), renders each one's first
// request as the agents build it and counts its tokens offline with the
// tokenizer of the backend the job runs on (tokenizer.go: the simulator's
// own count on sim:// and sim+http://, tiktoken's otherwise); it keeps the
// first bad inputs with their lines and a histogram of token counts, never
// the inputs. [Job.Report] turns what the scan found into the estimated
// model calls, prompt and completion tokens and cost of the run, each with
// a point estimate (a typical run) and a low-high range, from the sizes of
// the answers the output schema allows (answer_size.go) and, on sim://,
// the simulator's own tool turns. [Job.Sample] instead runs a few inputs
// for real, and [Report.FromSample] scales their measured figures to all
// the inputs. [Report.WriteTable] prints a report as the dry run's table
// and [Stats.WriteBad] the bad inputs a scan found.
//
// [Price] is the price a job's cost is reported at (the job file's
// pricing, else the built-in table's), with the cost lines a run prints.
//
// The package reads files and runs engines it is given; flags, opening
// backends and tools, and printing JSON and errors belong to internal/cli.
package estimate
