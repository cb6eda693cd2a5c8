package agent

import (
	"fmt"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

// takesMedia reports, with an error meant for the model, whether the
// agent's model takes every part of media, the result of a call of the
// tool name: "read_file: photos/cat.png is an image (image/png); the model
// takes no image parts".
func (r *Runner) takesMedia(name string, parts []llm.Part) error {
	for i := range parts {
		p := &parts[i]
		if p.Kind == llm.PartText || r.media.Accepts(*p) == nil {
			continue
		}
		what := p.Ref
		if what == "" {
			what = p.Filename
		}
		if what == "" {
			what = "the result"
		}
		kind := string(p.Kind)
		typ := p.MediaType
		if typ == "" {
			typ = "by URL"
		}
		return fmt.Errorf("%s: %s is %s (%s); the model takes no %s parts", name, what, article(p.Kind), typ, kind)
	}
	return nil
}

// article names a part kind with its article: "an image".
func article(k llm.PartKind) string {
	switch k {
	case llm.PartImage:
		return "an image"
	case llm.PartAudio:
		return "audio"
	case llm.PartFile:
		return "a document"
	}
	return "a " + string(k) + " part"
}

// toolParts is a tool message's parts for a result of text and media: the
// text first, when there is any, then the media.
func toolParts(text string, parts []llm.Part) []llm.Part {
	out := make([]llm.Part, 0, len(parts)+1)
	if text != "" {
		out = append(out, llm.Part{Kind: llm.PartText, Text: text})
	}
	return append(out, parts...)
}

// partsSize is the estimated tokens of a message's parts: text parts at
// bytesPerToken, media by partTokens. It is kept out of messageSize,
// which text-only messages pass through at every turn.
func partsSize(parts []llm.Part) int {
	n, b := 0, 0
	for i := range parts {
		b += len(parts[i].Text)
		n += partTokens(&parts[i])
	}
	return n + (b+bytesPerToken-1)/bytesPerToken
}

// partTokens is the estimated prompt tokens of a media part: the larger
// of what OpenAI and Anthropic bill for it, so that an estimate errs on
// the side of the context window. Text parts count as text.
func partTokens(p *llm.Part) int {
	if p.Kind == llm.PartText {
		return 0
	}
	return max(media.Tokens(p, media.BillingOpenAI), media.Tokens(p, media.BillingAnthropic))
}

// mediaNote is what a tool message's media become when compaction drops
// them: the message's text, and a line naming each part dropped.
func mediaNote(m *llm.Message) string {
	var text string
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Kind == llm.PartText {
			text += p.Text + "\n"
			continue
		}
		what := p.Ref
		if what == "" {
			what = p.Filename
		}
		text += fmt.Sprintf("[%s %s (%s) left out to fit the context window]\n", p.Kind, what, p.MediaType)
	}
	return text
}
