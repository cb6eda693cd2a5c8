package bedrock

import (
	"strings"
	"testing"
)

func TestDocumentName(t *testing.T) {
	long := strings.Repeat("a", 300) + ".pdf"
	tests := []struct{ in, want string }{
		{"invoice 2026.pdf", "invoice 2026"},
		{"../../etc/passwd", "passwd"},
		{`C:\scans\Q1 (draft) [v2].pdf`, "Q1 (draft) [v2]"},
		{"a__b\t\tc.d.pdf", "a b c d"},
		{"  -x- ", "-x-"},
		{"Ñandú façade.pdf", "and fa ade"},
		{"", "document"},
		{"...pdf", "document"},
		{"!!!.pdf", "document"},
		{long, strings.Repeat("a", maxDocumentName)},
	}
	for _, tt := range tests {
		if got := documentName(tt.in); got != tt.want {
			t.Errorf("documentName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDocNamesUnique(t *testing.T) {
	var d docNames
	long := strings.Repeat("b", maxDocumentName)
	got := []string{d.unique("a"), d.unique("a"), d.unique("a"), d.unique(long), d.unique(long)}
	want := []string{"a", "a (2)", "a (3)", long, strings.Repeat("b", maxDocumentName-4) + " (2)"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("unique call %d = %q, want %q", i, got[i], want[i])
		}
	}
	if n := len(got[4]); n > maxDocumentName {
		t.Errorf("unique name of %d bytes, want at most %d", n, maxDocumentName)
	}
}
