package progress

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"
)

// Table is an end-of-run summary: a heading line, then one row per
// figure, a label and a value, the labels right-aligned on their colons
// ("  concurrency: fixed 16", "         cost: $0.0123") as systemctl
// status aligns its own. The zero value is an empty table; it is not safe
// for concurrent use.
type Table struct {
	rows []tableRow
}

// tableRow is one row of a Table.
type tableRow struct{ label, value string }

// MaxLabel is the widest label that widens a Table's label column: a
// longer one (a tool's name) overflows its row alone.
const MaxLabel = 14

// Add adds a row: label, and the value formatted from format and args.
func (t *Table) Add(label, format string, args ...any) {
	t.rows = append(t.rows, tableRow{label: label, value: fmt.Sprintf(format, args...)})
}

// Write writes heading, then t's rows, to w. With width above 0 (a
// terminal's), every line is wrapped at word boundaries to fit: the
// heading's continuations indented by two columns, a value's by its
// column; a single word wider than that is left whole. A width of 0 or
// less does not wrap.
func (t *Table) Write(w io.Writer, heading string, width int) error {
	col := 0
	for _, r := range t.rows {
		if n := runewidth.StringWidth(r.label); n <= MaxLabel {
			col = max(col, n)
		}
	}
	var b strings.Builder
	b.WriteString(wrap(heading, width, 0, 2))
	for _, r := range t.rows {
		lead := fmt.Sprintf("  %*s: ", col, r.label)
		b.WriteString(lead)
		b.WriteString(wrap(r.value, width, runewidth.StringWidth(lead), 2+col+2))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap returns s broken at spaces into lines that fit width (0: no
// limit), ending with a newline: the first line starts at column first,
// the next ones are indented to column indent.
func wrap(s string, width, first, indent int) string {
	if width <= 0 {
		return s + "\n"
	}
	var b strings.Builder
	at := first
	lineStart := true
	for word := range strings.FieldsSeq(s) {
		n := runewidth.StringWidth(word)
		switch {
		case lineStart:
		case at+1+n > width:
			b.WriteString("\n" + strings.Repeat(" ", indent))
			at = indent
		default:
			b.WriteString(" ")
			at++
		}
		b.WriteString(word)
		at += n
		lineStart = false
	}
	return b.String() + "\n"
}

// Width returns the width of the terminal that w (or, w being a Writer,
// the stream under it) is, or 0 when it is not one.
func Width(w io.Writer) int {
	f, ok := Base(w).(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}
