package cli

import (
	"io"

	"github.com/batchagent/batchagent/internal/progress"
)

// The commands and the logger write to stderr through a progress.Writer
// (made in newRoot): while a progress display is drawn, their lines go
// above its live line.

// baseWriter returns the writer under w: stderr itself.
func baseWriter(w io.Writer) io.Writer { return progress.Base(w) }
