package media

import (
	"bytes"
	"fmt"
)

// MaxPDFScan is how many leading bytes of a PDF [PDFPages] reads: a
// bound on the work one document costs.
const MaxPDFScan = 64 << 20

// MaxPDFPages is the most pages [PDFPages] counts.
const MaxPDFPages = 100_000

// PDFPages counts the pages of a PDF: its page objects (/Type /Page, not
// /Pages) within its first MaxPDFScan bytes, at most MaxPDFPages. A PDF
// whose page objects all sit in compressed object streams shows none:
// PDFPages then returns 0, unknown, and no error. It returns an error for
// bytes that are not a PDF.
func PDFPages(data []byte) (int, error) {
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		return 0, fmt.Errorf("media: not a PDF (no %%PDF- header)")
	}
	data = data[:min(len(data), MaxPDFScan)]
	n := 0
	for n < MaxPDFPages {
		i := bytes.Index(data, []byte("/Type"))
		if i < 0 {
			break
		}
		data = data[i+len("/Type"):]
		rest := bytes.TrimLeft(data, " \t\r\n\f\x00")
		if !bytes.HasPrefix(rest, []byte("/Page")) {
			continue
		}
		rest = rest[len("/Page"):]
		if len(rest) > 0 && isNameByte(rest[0]) { // /Pages, /PageLabel
			continue
		}
		n++
	}
	return n, nil
}

// isNameByte reports whether c continues a PDF name: not whitespace nor a
// delimiter.
func isNameByte(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f', 0, '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return false
	}
	return true
}
