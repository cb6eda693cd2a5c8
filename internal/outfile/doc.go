// Package outfile owns the results file of `batchagent run --out`: one
// JSON line per input, and the files kept beside it.
//
// # Writing
//
// A [Writer] writes each result as one line as it completes, in
// completion order or, buffered, in input order, with its cost where the
// job has a price; [AppendCost] prices a line written elsewhere (a
// worker's).
//
// # Tables
//
// An output named .csv or .parquet ([FormatOf]) is a [Table]: one row per
// input, in input order, with the index, one column per top-level
// property of the output schema ([Columns]; typed in Parquet), the error
// kind and message, turns, token counts and cost. Its results go as
// lines to a journal beside it ([JournalPath]), which resumes exactly as
// a JSONL output does; [OpenTable]'s Close writes the table from the
// journal to a temporary file renamed over it ([WriteTable]).
//
// # Before the run
//
// [CheckFiles] refuses a run whose output, state file or reduce output is
// a file the run reads, or one another of them writes. [TakeLock] takes a
// flock(2) lock on a sidecar FILE.lock, naming its [Holder], so that two
// runs never write one file. [MoveAside] moves an earlier run's files to
// numbered names for --restart.
//
// # Resuming
//
// A resumed run checks its inputs against the states its checkpoint
// store saved ([CheckInputs]; changed inputs are refused without
// --force) and makes a [Plan] of which lines of the results file stay.
// [Open] reconciles the file with the plan (torn, duplicated, changed and
// unsaved lines go; in ordered mode only the unbroken prefix stays) and
// returns the indexes kept, for [Writer.Skip]. [Store] wraps the
// checkpoint store for the engine: the states loaded for the check feed
// its first Load, the states of changed inputs are forgotten, and the
// first failed save is kept for the run's message.
//
// A run over Redis (`run --redis`) writes its lines in completion order
// and keeps no checkpoint store beside its output: [OpenRun] truncates
// the output of a new run, or keeps the complete lines of a resumed one
// (less those of failed results run again) and says which indexes they
// hold.
//
// # Status
//
// [WriteStatus] writes `batchagent status` from a job's summary in the
// store, [WriteStatusJSON] `status --json` from the summaries of all
// jobs, and [WriteAgentState] `status --agent N`: one agent's saved state
// with its timings and spans in seconds, as result lines have them.
//
// # Export
//
// [Export] writes `batchagent export`: the result lines of a job's
// finished states, in input order, through a [Writer].
//
// Flags, the choice of paths and the printing of messages belong to
// internal/cli.
package outfile
