package filetool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/batchagent/batchagent/tool"
)

// DefaultMaxEntries is the default [ListDirConfig.MaxEntries].
const DefaultMaxEntries = 1000

// listDirChunk is how many directory entries are read at a time.
const listDirChunk = 1024

// ListDirConfig confines the list_dir tool. The zero value is not usable:
// Roots is required.
type ListDirConfig struct {
	// Roots are the directories the tool may list, tried in order. At least
	// one is required; each must exist when [ListDir] is called.
	Roots []string
	// MaxEntries is the most entries one listing returns; the first
	// MaxEntries by name are kept and a last line
	// "[truncated: N more entries]" says how many were left out. Defaults to
	// DefaultMaxEntries; negative is an error.
	MaxEntries int
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]): set it
	// when the directories do not change while a job runs.
	Cacheable bool
}

// listDir is the list_dir tool.
type listDir struct {
	spec       tool.Spec
	roots      []*os.Root
	maxEntries int
}

// ListDir returns the list_dir tool, which lists the entries of a directory.
// Its arguments are {"path": string}, a directory relative to a root; the
// path is optional, and "" or "." is the root itself. With several roots, the
// first root that has the path wins. It is safe for concurrent use.
//
// The result has one line per entry, sorted by name (byte order): "name/"
// for a directory, "name  SIZE bytes" for a regular file,
// "name -> (symlink)" for a symbolic link, which is never followed nor
// resolved, and "name  (KIND)" for other files such as named pipes. Names
// holding control characters or invalid UTF-8 are written quoted, as by
// [strconv.Quote], so that one entry is always one line. An empty directory
// gives "(empty directory)". Listings longer than MaxEntries end with the
// line "[truncated: N more entries]".
//
// Every directory is opened through an [os.Root], so a path that leaves its
// root, by "..", by being absolute or through a symbolic link, is refused;
// symbolic links that stay inside the root are followed when they are part
// of the path. Also refused, with an error text meant for the model: paths
// that are not directories. A missing directory's error wraps
// [fs.ErrNotExist].
//
// ListDir fails if Roots is empty, a root cannot be opened as a directory, or
// MaxEntries is negative. The roots stay open until the tool is closed: it
// implements [io.Closer], and its Close closes the roots, after which its
// calls fail. Close waits for no call (a call under way may succeed or
// fail) and may be called more than once and concurrently with calls; it
// returns the errors of closing the roots.
func ListDir(cfg ListDirConfig) (tool.Tool, error) {
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxEntries < 0 {
		return nil, fmt.Errorf("tool: list_dir: negative MaxEntries %d", cfg.MaxEntries)
	}
	roots, err := openRoots("list_dir", cfg.Roots)
	if err != nil {
		return nil, err
	}
	t := &listDir{maxEntries: cfg.MaxEntries, roots: roots}
	t.spec = tool.Spec{
		Name: "list_dir",
		Description: fmt.Sprintf("List the entries of a directory, one per line sorted by name: "+
			"\"name/\" for a directory, \"name  SIZE bytes\" for a file, \"name -> (symlink)\" for a symbolic link. "+
			"The path is relative to the project directory, for example \"src\"; leave it out or give \".\" for the project directory itself. "+
			"Absolute paths and paths leading outside the project are refused. At most %d entries are listed.", cfg.MaxEntries),
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string",` +
			`"description":"Directory to list, relative to the project directory, for example \"src\"; \".\" or empty for the project directory itself."}},` +
			`"additionalProperties":false}`),
		Cacheable: cfg.Cacheable,
	}
	return t, nil
}

func (t *listDir) Spec() tool.Spec { return t.spec }

func (t *listDir) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := tool.DecodeArgs(args, &a, `{"path": "<directory path>"}`); err != nil {
		return "", err
	}
	dir := "."
	if a.Path != nil && *a.Path != "" {
		dir = *a.Path
	}
	return inRoots(ctx, t.roots, dir, func(r *os.Root, path string) (string, error) {
		return t.list(ctx, r, path)
	})
}

// Close closes the tool's roots; see [ListDir].
func (t *listDir) Close() error { return closeRoots(t.roots) }

// list lists dir in r.
func (t *listDir) list(ctx context.Context, r *os.Root, dir string) (string, error) {
	info, err := r.Stat(dir)
	if err != nil {
		return "", openError(dir, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("path %q: not a directory", dir)
	}
	f, err := r.Open(dir)
	if err != nil {
		return "", openError(dir, err)
	}
	defer f.Close()

	// Keep the first maxEntries entries by name without holding a huge
	// directory in memory: sort and cut whenever twice as many are held.
	var kept []fs.DirEntry
	total := 0
	for {
		batch, err := f.ReadDir(listDirChunk)
		kept = append(kept, batch...)
		total += len(batch)
		if len(kept) > 2*t.maxEntries {
			kept = sortedPrefix(kept, t.maxEntries)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("path %q: %v", dir, unwrapPath(err))
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
	}
	kept = sortedPrefix(kept, t.maxEntries)
	if total == 0 {
		return "(empty directory)", nil
	}

	var b strings.Builder
	for i, e := range kept {
		if i > 0 {
			b.WriteByte('\n')
		}
		writeEntry(&b, e)
	}
	if more := total - len(kept); more > 0 {
		fmt.Fprintf(&b, "\n[truncated: %d more entries]", more)
	}
	return b.String(), nil
}

// sortedPrefix sorts entries by name and returns the first n.
func sortedPrefix(entries []fs.DirEntry, n int) []fs.DirEntry {
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	if len(entries) > n {
		clear(entries[n:]) // let the dropped entries be collected
		entries = entries[:n]
	}
	return entries
}

// writeEntry writes e's line of a listing to b.
func writeEntry(b *strings.Builder, e fs.DirEntry) {
	name := e.Name()
	if strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
		name = strconv.Quote(name)
	}
	b.WriteString(name)
	typ := e.Type()
	switch {
	case typ&fs.ModeSymlink != 0:
		b.WriteString(" -> (symlink)")
	case typ.IsDir():
		b.WriteByte('/')
	case typ.IsRegular():
		// Entries of a directory opened in an os.Root carry their
		// FileInfo, read relative to the directory: Info does not go
		// through the path again.
		if info, err := e.Info(); err == nil {
			fmt.Fprintf(b, "  %d bytes", info.Size())
		} else {
			b.WriteString("  (size unknown)")
		}
	case typ&fs.ModeNamedPipe != 0:
		b.WriteString("  (named pipe)")
	case typ&fs.ModeSocket != 0:
		b.WriteString("  (socket)")
	case typ&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		b.WriteString("  (device)")
	default:
		b.WriteString("  (special file)")
	}
}
