package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultReadFileMaxBytes is the default [ReadFileConfig.MaxBytes].
const DefaultReadFileMaxBytes = 1 << 20

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
	// with an error saying so. Defaults to DefaultReadFileMaxBytes; negative
	// is an error.
	MaxBytes int64
	// Cacheable marks the tool cacheable ([Spec.Cacheable]): set it when the
	// files do not change while a job runs.
	Cacheable bool
}

// readFile is the read_file tool.
type readFile struct {
	spec     Spec
	roots    []*os.Root
	maxBytes int64
}

// openRoots opens the directories a file tool may read below, at least
// one; on error the roots already opened are closed.
func openRoots(name string, dirs []string) ([]*os.Root, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("tool: %s: no Roots", name)
	}
	var roots []*os.Root
	for _, dir := range dirs {
		r, err := os.OpenRoot(dir)
		if err != nil {
			for _, r := range roots {
				r.Close()
			}
			return nil, fmt.Errorf("tool: %s: root %q: %w", name, dir, err)
		}
		roots = append(roots, r)
	}
	return roots, nil
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
// MaxBytes is negative. The roots stay open for the life of the Tool.
func ReadFile(cfg ReadFileConfig) (Tool, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultReadFileMaxBytes
	}
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("tool: read_file: negative MaxBytes %d", cfg.MaxBytes)
	}
	roots, err := openRoots("read_file", cfg.Roots)
	if err != nil {
		return nil, err
	}
	t := &readFile{maxBytes: cfg.MaxBytes, roots: roots}
	t.spec = Spec{
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

func (t *readFile) Spec() Spec { return t.spec }

func (t *readFile) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Path *string `json:"path"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return "", fmt.Errorf(`%w: %v; want {"path": "<file path>"}`, ErrBadArguments, err)
	}
	if a.Path == nil {
		return "", fmt.Errorf(`%w: missing required argument "path"`, ErrBadArguments)
	}
	path := *a.Path
	switch {
	case path == "":
		return "", errors.New(`path is empty; give a file path relative to the project directory, for example "README.md"`)
	case filepath.IsAbs(path) || strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`):
		return "", fmt.Errorf("path %q: absolute paths are not allowed; give a path relative to the project directory", path)
	case !filepath.IsLocal(path):
		return "", fmt.Errorf("path %q: path escapes the allowed roots", path)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	for _, r := range t.roots {
		content, err := t.read(r, path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // try the next root
		}
		return content, err
	}
	return "", fmt.Errorf("path %q: %w", path, fs.ErrNotExist)
}

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
	var buf bytes.Buffer
	buf.Grow(int(info.Size()) + 1)
	// The file may have grown since Stat: read one byte past the limit to
	// notice.
	if _, err := buf.ReadFrom(io.LimitReader(f, t.maxBytes+1)); err != nil {
		return "", fmt.Errorf("path %q: %v", path, unwrapPath(err))
	}
	data := buf.Bytes()
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

// openError describes a failure of os.Root to stat or open path. Errors that
// mean "not here" keep wrapping fs.ErrNotExist or syscall.ENOTDIR.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return err
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("path %q: permission denied", path)
	case isEscape(err):
		return fmt.Errorf("path %q: path escapes the allowed roots", path)
	}
	return fmt.Errorf("path %q: %v", path, unwrapPath(err))
}

// isEscape reports whether err is os.Root's refusal of a path that leaves
// the root. os does not export that error, but it is the only one os.Root's
// Stat and Open return that is not a system error (syscall.Errno) once the
// path is known to be non-empty; the read_file tests pin this down.
func isEscape(err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(pe.Err, &errno) && !errors.Is(pe.Err, fs.ErrInvalid) && !errors.Is(pe.Err, fs.ErrClosed)
}

// unwrapPath strips the *fs.PathError around err: its operation and path
// ("statat x: ...") say nothing useful to a model.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
