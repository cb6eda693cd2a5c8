package filetool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/batchagent/batchagent/tool"
)

// DefaultMaxBytes is the default [ReadFileConfig.MaxBytes]. It is
// [tool.DefaultMaxResultBytes], so that a [tool.Pool] with the default
// [tool.PoolConfig.MaxResultBytes] returns every file read_file accepts whole.
const DefaultMaxBytes = tool.DefaultMaxResultBytes

// binarySniffBytes is how much of a file is searched for a NUL byte to tell
// binary files from text.
const binarySniffBytes = 8 << 10

// ReadFileConfig confines the read_file tool. The zero value is not usable:
// Roots is required.
type ReadFileConfig struct {
	// Roots are the directories the tool may read, tried in order. At least
	// one is required; each must exist when [ReadFile] is called.
	Roots []string
	// MaxBytes is the largest file the tool returns; larger files are refused
	// with an error saying so. Defaults to DefaultMaxBytes; negative is an
	// error. A [tool.Pool] also cuts every result to
	// [tool.PoolConfig.MaxResultBytes]: raise both together.
	MaxBytes int64
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]): set it
	// when the files do not change while a job runs.
	Cacheable bool
}

// readFile is the read_file tool.
type readFile struct {
	spec     tool.Spec
	roots    []*os.Root
	maxBytes int64
}

// ReadFile returns the read_file tool, which returns the contents of a text
// file. Its arguments are {"path": string}, a path relative to a root; with
// several roots, the first root that has the path wins. It is safe for
// concurrent use.
//
// Every file is opened through an [os.Root], so a path that leaves its root,
// by "..", by being absolute or through a symbolic link, is refused; symbolic
// links that stay inside the root are followed. Also refused, with an error
// text meant for the model: an empty path, directories, files that are not
// regular, files over MaxBytes and binary files (a NUL byte in the first
// 8 KiB). A missing file's error wraps [fs.ErrNotExist].
//
// ReadFile fails if Roots is empty, a root cannot be opened as a directory, or
// MaxBytes is negative. The roots stay open until the tool is closed: it
// implements [io.Closer], and its Close closes the roots, after which its
// calls fail. Close waits for no call (a call under way may succeed or
// fail) and may be called more than once and concurrently with calls; it
// returns the errors of closing the roots.
func ReadFile(cfg ReadFileConfig) (tool.Tool, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("tool: read_file: negative MaxBytes %d", cfg.MaxBytes)
	}
	roots, err := openRoots("read_file", cfg.Roots)
	if err != nil {
		return nil, err
	}
	t := &readFile{maxBytes: cfg.MaxBytes, roots: roots}
	t.spec = tool.Spec{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file and return its contents. "+
			"The path is relative to the project directory, for example \"src/main.go\"; "+
			"absolute paths and paths leading outside the project are refused, "+
			"as are directories, binary files and files over %d bytes.", cfg.MaxBytes),
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string",` +
			`"description":"Path of the file, relative to the project directory, for example \"src/main.go\"."}},` +
			`"required":["path"],"additionalProperties":false}`),
		Cacheable: cfg.Cacheable,
	}
	return t, nil
}

func (t *readFile) Spec() tool.Spec { return t.spec }

func (t *readFile) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := tool.DecodeArgs(args, &a, `{"path": "<file path>"}`); err != nil {
		return "", err
	}
	if a.Path == nil {
		return "", fmt.Errorf(`%w: missing required argument "path"`, tool.ErrBadArguments)
	}
	path := *a.Path
	if path == "" {
		return "", errors.New(`path is empty; give a file path relative to the project directory, for example "README.md"`)
	}
	return inRoots(ctx, t.roots, path, t.read)
}

// Close closes the tool's roots; see [ReadFile].
func (t *readFile) Close() error { return closeRoots(t.roots) }

// read reads path in r.
func (t *readFile) read(r *os.Root, path string) (string, error) {
	info, err := r.Stat(path)
	if err != nil {
		return "", openError(path, err)
	}
	switch {
	case info.IsDir():
		return "", fmt.Errorf("path %q: is a directory", path)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("path %q: not a regular file", path)
	case info.Size() > t.maxBytes:
		return "", t.tooLarge(path, info.Size())
	}
	f, err := r.Open(path)
	if err != nil {
		return "", openError(path, err)
	}
	defer f.Close()
	// Read the size Stat gave and one byte more, to notice that the file
	// grew since; if it did, read on up to one byte past the limit.
	data := make([]byte, info.Size()+1)
	n, err := io.ReadFull(f, data)
	switch {
	case err == nil:
		rest, err := io.ReadAll(io.LimitReader(f, t.maxBytes-info.Size()))
		if err != nil {
			return "", fmt.Errorf("path %q: %v", path, unwrapPath(err))
		}
		data = append(data, rest...)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		data = data[:n]
	default:
		return "", fmt.Errorf("path %q: %v", path, unwrapPath(err))
	}
	if int64(len(data)) > t.maxBytes {
		return "", t.tooLarge(path, int64(len(data)))
	}
	if bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
		return "", fmt.Errorf("path %q: binary file", path)
	}
	return string(data), nil
}

func (t *readFile) tooLarge(path string, size int64) error {
	return fmt.Errorf("path %q: file is %d bytes, over the limit of %d bytes", path, size, t.maxBytes)
}
