// Package batchmode runs model calls through a provider's batch API
// (OpenAI's Files and Batches, Anthropic's Message Batches) at the
// provider's batch price, behind the llm.Model seam: each call waits in a
// submission, the submission goes out as one batch, and the call returns
// when the batch's result for it is read back. Agents therefore run turn
// by turn through batch rounds: an agent's next turn joins the next
// submission once its tools have run.
//
// A [Provider] is one provider's API; the [Model] collects, journals,
// submits, polls and matches results by custom_id.
package batchmode

import "errors"

// ErrUnanswered is the class of a line a batch ended without answering:
// it expired with the completion window, or the batch was cancelled. The
// Model asks such a line again in a later submission.
var ErrUnanswered = errors.New("batchmode: line not answered by its batch")
