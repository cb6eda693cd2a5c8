package mcptool

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText renders a tool result for the model: the text of its content
// blocks joined by "\n", other blocks described in brackets, and the
// structured content as compact JSON when no block is text.
func resultText(res *mcp.CallToolResult) string {
	parts := make([]string, 0, len(res.Content)+1)
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
			hasText = true
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts = append(parts, r.Text)
				hasText = true
			} else {
				parts = append(parts, describe(c))
			}
		default:
			parts = append(parts, describe(c))
		}
	}
	if !hasText && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append([]string{string(b)}, parts...)
		} else {
			parts = append([]string{fmt.Sprintf("[structured content that is not JSON: %v]", err)}, parts...)
		}
	}
	return strings.Join(parts, "\n")
}

// describe returns a bracketed description of a content block that is not
// text, such as "[image/png, 1234 bytes]".
func describe(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.ImageContent:
		return fmt.Sprintf("[%s, %d bytes]", orDefault(c.MIMEType, "image"), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[%s, %d bytes]", orDefault(c.MIMEType, "audio"), len(c.Data))
	case *mcp.ResourceLink:
		var b strings.Builder
		fmt.Fprintf(&b, "[resource link %s", c.URI)
		if name := orDefault(c.Title, c.Name); name != "" {
			fmt.Fprintf(&b, " %q", name)
		}
		if c.MIMEType != "" {
			b.WriteString(", " + c.MIMEType)
		}
		if c.Size != nil {
			fmt.Fprintf(&b, ", %d bytes", *c.Size)
		}
		if c.Description != "" {
			b.WriteString(": " + c.Description)
		}
		return b.String() + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[empty resource]"
		}
		return fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, orDefault(r.MIMEType, "binary"), len(r.Blob))
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
