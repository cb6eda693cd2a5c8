// Package jobrun runs a job file: `batchagent run` without its flags.
//
// Open loads the job file, opens its backend, tools and inputs, takes the
// locks of its output and state file, records the run in its checkpoint
// store and plans what a resumed run keeps of its output; Run.Run
// streams the results into the output, draws the progress display,
// handles SIGINT and SIGTERM in two phases, runs the reduce step and
// prints the summary. OpenJob opens a job file as a run does, for the
// dry run and the Redis worker, so that the three agree on what a job
// file means; Reads, OutputFile, InputFormatOf and CheckPlaceholders are
// the checks a run makes before it opens anything, shared with the
// coordinator of a run over Redis.
package jobrun
