// Package progress holds the one progress display of the commands: a live
// line drawn with vbauerster/mpb on a terminal, or plain periodic lines
// elsewhere, fed by a source of Counters read every tick.
//
// On a terminal the line is sized to the terminal's width (truncated,
// never wrapping) and redrawn in place; what else is written to the
// command's stderr through a Writer while it is drawn is printed above it.
// Off a terminal there is no live line: a Display prints a line every
// Config.LogEvery, if at all, each ending with a newline.
//
// A `batchagent run` feeds it the engine's Stats, a run over Redis the
// coordinator's counts and `run --openai-batch` the batch's request counts:
// each turns what it counts into Counters.
package progress
