package bedrock

import (
	"context"
	"fmt"
	"iter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/batchagent/batchagent/llm"
)

// Stream calls ConverseStream for req and yields its events as they
// arrive: text deltas, tool-call pieces (ID and name first, then fragments
// of the arguments, then llm.EventToolCallDone at the call's
// contentBlockStop, or at messageStop for a call whose block did not
// stop), the usage (held until the stream has ended, so that it follows
// every call's EventToolCallDone whatever order the events came in), and
// last an EventDone. With an output tool
// (see the package documentation) text is held back and the tool's input
// is yielded whole, as one EventText of compact JSON just before EventDone;
// an output call beside calls of real tools is dropped, as in Generate. A failure is yielded once, as the last pair: an
// *llm.APIError (llm.ErrConnection when the stream ends before its
// messageStop event), or ctx's error when ctx ends first. Breaking out of
// the loop closes the response body.
//
// The call runs on a stack of its own (llm.OnOwnStack), so that the SDK's
// frames do not grow the calling agent's goroutine stack.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return llm.OnOwnStack(m.stream(ctx, req))
}

// stream is Stream on the calling goroutine.
func (m *Model) stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		p, err := m.buildParams(req)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		out, err := m.client.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
			ModelId:         &p.modelID,
			Messages:        p.messages,
			System:          p.system,
			ToolConfig:      p.toolConfig,
			InferenceConfig: p.inference,
		})
		if err != nil {
			yield(llm.Event{}, m.classify(ctx, err))
			return
		}
		stream := out.GetStream()
		defer stream.Close()
		s := streamState{output: p.output, calls: make(map[int32]int), closed: make(map[int]bool), outputBlock: -1, maxTokens: int(aws.ToInt32(p.inference.MaxTokens))}
		events := stream.Events()
		for {
			var (
				ev types.ConverseStreamOutput
				ok bool
			)
			select {
			case <-ctx.Done():
				yield(llm.Event{}, ctx.Err())
				return
			case ev, ok = <-events:
			}
			if !ok {
				break
			}
			if !s.handle(ev, yield) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, m.classify(ctx, fmt.Errorf("event stream: %w", llm.HideURLs(err))))
			return
		}
		if err := ctx.Err(); err != nil {
			yield(llm.Event{}, err)
			return
		}
		if !s.stopped {
			yield(llm.Event{}, &llm.APIError{Backend: backendName, Message: "event stream ended before messageStop", Err: llm.ErrConnection})
			return
		}
		s.finish(yield)
	}
}

// streamState follows one ConverseStream response.
type streamState struct {
	// output names the output tool, or is empty.
	output string
	// calls maps the content-block index of each tool-use block to the
	// call's index among the response's calls.
	calls map[int32]int
	// closed holds the indexes of the calls whose llm.EventToolCallDone
	// was sent: their contentBlockStop came.
	closed map[int]bool
	// outputBlock is the content-block index of the output tool's block,
	// or -1.
	outputBlock int32
	// text buffers the text of a structured answer, which is yielded only
	// if the model did not call the output tool; outputArgs buffers the
	// output tool's input.
	text, outputArgs []byte
	stop             types.StopReason
	stopped          bool // messageStop arrived
	// usage is the last metadata event's usage, yielded by finish;
	// hasUsage tells whether one came.
	usage    llm.Usage
	hasUsage bool
	// maxTokens is the request's token cap; holding counts the bytes of
	// text and outputArgs, capped at llm.AnswerLimit(maxTokens).
	maxTokens, holding int
}

// hold reports whether n more bytes may be held back; when not, it
// yields an error wrapping llm.ErrTruncated: the server did not stop at
// the token cap.
func (s *streamState) hold(n int, yield func(llm.Event, error) bool) bool {
	limit := llm.AnswerLimit(s.maxTokens)
	if s.holding+n > limit {
		yield(llm.Event{}, truncated(&llm.SizeError{Limit: int64(limit), MaxTokens: s.maxTokens}))
		return false
	}
	s.holding += n
	return true
}

// handle folds one event in, yielding what it carries. It returns false
// when the consumer stopped.
func (s *streamState) handle(ev types.ConverseStreamOutput, yield func(llm.Event, error) bool) bool {
	switch ev := ev.(type) {
	case *types.ConverseStreamOutputMemberContentBlockStart:
		start, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
		if !ok {
			return true
		}
		block := aws.ToInt32(ev.Value.ContentBlockIndex)
		name := aws.ToString(start.Value.Name)
		if s.output != "" && name == s.output {
			if s.outputBlock < 0 { // the first answer counts
				s.outputBlock = block
			}
			return true
		}
		i := len(s.calls)
		s.calls[block] = i
		return yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i, ID: aws.ToString(start.Value.ToolUseId), Name: name}}, nil)
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		block := aws.ToInt32(ev.Value.ContentBlockIndex)
		switch d := ev.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			if s.output != "" {
				if !s.hold(len(d.Value), yield) {
					return false
				}
				s.text = append(s.text, d.Value...)
				return true
			}
			if d.Value == "" {
				return true
			}
			return yield(llm.Event{Type: llm.EventText, Text: d.Value}, nil)
		case *types.ContentBlockDeltaMemberToolUse:
			frag := aws.ToString(d.Value.Input)
			if block == s.outputBlock {
				if !s.hold(len(frag), yield) {
					return false
				}
				s.outputArgs = append(s.outputArgs, frag...)
				return true
			}
			i, ok := s.calls[block]
			if !ok || frag == "" {
				return true // a fragment of no announced call
			}
			return yield(llm.Event{Type: llm.EventToolCall, ToolCall: llm.ToolCallDelta{Index: i, Arguments: frag}}, nil)
		}
	case *types.ConverseStreamOutputMemberContentBlockStop:
		i, ok := s.calls[aws.ToInt32(ev.Value.ContentBlockIndex)]
		if !ok || s.closed[i] {
			return true
		}
		s.closed[i] = true
		return yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil)
	case *types.ConverseStreamOutputMemberMessageStop:
		s.stop, s.stopped = ev.Value.StopReason, true
		// Calls whose block did not stop end here.
		return s.closeCalls(yield)
	case *types.ConverseStreamOutputMemberMetadata:
		// Bedrock sends it after messageStop; a stream that sends it while
		// a call is open must not have the usage overtake that call's
		// EventToolCallDone.
		s.usage, s.hasUsage = usage(ev.Value.Usage), true
	}
	return true
}

// closeCalls yields EventToolCallDone for every call not closed yet. It
// returns false when the consumer stopped.
func (s *streamState) closeCalls(yield func(llm.Event, error) bool) bool {
	for i := range len(s.calls) {
		if !s.closed[i] {
			s.closed[i] = true
			if !yield(llm.Event{Type: llm.EventToolCallDone, ToolCall: llm.ToolCallDelta{Index: i}}, nil) {
				return false
			}
		}
	}
	return true
}

// finish closes the calls still open (a block begun after messageStop),
// then yields the usage, the structured answer, if any, and EventDone.
func (s *streamState) finish(yield func(llm.Event, error) bool) {
	if !s.closeCalls(yield) {
		return
	}
	if s.hasUsage && !yield(llm.Event{Type: llm.EventUsage, Usage: s.usage}, nil) {
		return
	}
	if s.output != "" {
		text := string(s.text)
		if s.outputBlock >= 0 && len(s.calls) == 0 { // else dropped, as in Generate
			args := s.outputArgs
			if len(args) == 0 {
				args = []byte("{}")
			}
			text = compactJSON(args)
		}
		if text != "" && !yield(llm.Event{Type: llm.EventText, Text: text}, nil) {
			return
		}
	}
	yield(llm.Event{Type: llm.EventDone, FinishReason: finishReason(s.stop, len(s.calls) > 0)}, nil)
}
