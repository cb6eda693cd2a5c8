package filetool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

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
			closeRoots(roots)
			return nil, fmt.Errorf("tool: %s: root %q: %w", name, dir, err)
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// closeRoots closes roots. Closing an os.Root again does nothing, and calls
// that are using a root when it is closed finish first.
func closeRoots(roots []*os.Root) error {
	var errs []error
	for _, r := range roots {
		if err := r.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// inRoots runs fn on path, a path relative to the roots given by a model, in
// the first root that has it, and returns fn's result. It refuses absolute
// paths and paths that leave the roots lexically, and returns ctx's error if
// ctx is done, before trying any root. An error of fn wrapping
// fs.ErrNotExist or syscall.ENOTDIR means the root does not have path: the
// next root is tried, and if none has it the error wraps fs.ErrNotExist.
// Every error but ctx's is meant for the model.
func inRoots[T any](ctx context.Context, roots []*os.Root, path string, fn func(r *os.Root, path string) (T, error)) (T, error) {
	var zero T
	switch {
	case filepath.IsAbs(path) || strings.HasPrefix(path, "/") || strings.HasPrefix(path, `\`):
		return zero, fmt.Errorf("path %q: absolute paths are not allowed; give a path relative to the project directory", path)
	case !filepath.IsLocal(path):
		return zero, fmt.Errorf("path %q: path escapes the allowed roots", path)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	for _, r := range roots {
		out, err := fn(r, path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // try the next root
		}
		return out, err
	}
	return zero, fmt.Errorf("path %q: %w", path, fs.ErrNotExist)
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
