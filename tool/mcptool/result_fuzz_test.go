package mcptool

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzResultText renders arbitrary tools/call results: it must not panic,
// must keep every text block, and must describe every other block on a line
// of its own.
func FuzzResultText(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"a\nb"},{"type":"image","mimeType":"image/png","data":"AQID"}]}`,
		`{"content":[{"type":"audio","data":""},{"type":"resource_link","uri":"file:///x","name":"x","size":3}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///y","text":"inline"}}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///z","blob":"AAE="}}]}`,
		`{"content":[],"structuredContent":{"n":1,"s":"x"}}`,
		`{"content":null,"structuredContent":[1,2,3],"isError":true}`,
		`{"content":[{"type":"text","text":""}],"structuredContent":"ignored"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var res mcp.CallToolResult
		if err := json.Unmarshal(data, &res); err != nil {
			return
		}
		got := resultText(&res)
		hasText := false
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				hasText = true
				if !strings.Contains(got, tc.Text) {
					t.Errorf("resultText(%s) = %q, missing text block %q", data, got, tc.Text)
				}
			}
		}
		if res.StructuredContent != nil && !hasText && got == "" {
			t.Errorf("resultText(%s) = \"\", want the structured content", data)
		}
		if len(res.Content) > 0 && !hasText && res.StructuredContent == nil {
			// Only descriptions and embedded text: at least one line per block.
			if n := strings.Count(got, "\n") + 1; n < len(res.Content) {
				t.Errorf("resultText(%s) = %q: %d lines for %d blocks", data, got, n, len(res.Content))
			}
		}
		if utf8.Valid(data) && !utf8.ValidString(got) {
			t.Errorf("resultText(%s) = %q, not valid UTF-8", data, got)
		}
	})
}
