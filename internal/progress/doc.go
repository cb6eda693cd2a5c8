// Package progress holds the one progress display of the commands: a live
// line drawn with vbauerster/mpb on a terminal, or plain periodic lines
// elsewhere, fed by a source of Counters read every tick.
//
// On a terminal the line is fitted to the terminal's width at every redraw
// (Counters.Fit: a bar, the percentage, the rate and the ETA first, then
// the cost, then the run's internals while they fit; never wrapping) and
// redrawn in place; what else is written to the command's stderr through
// a Writer while it is drawn is printed above it; a SIGINT removes it at
// once. Off a terminal there is no live line: a Display prints a plain
// line at Config.LogFirst and then every Config.LogEvery, if at all, each
// ending with a newline. A Table is the end-of-run summary: labels
// aligned on their colons, values wrapped at word boundaries to the
// terminal's width.
//
// A `batchagent run` feeds it the engine's Stats, a run over Redis the
// coordinator's counts and `run --openai-batch` the batch's request counts:
// each turns what it counts into Counters.
package progress
