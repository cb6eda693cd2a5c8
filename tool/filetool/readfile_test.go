package filetool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchagent/batchagent/tool"
	"github.com/batchagent/batchagent/tool/filetool"
)

// writeFiles creates files (path → content) under dir; a content starting
// with "->" makes a symbolic link to the rest instead.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(filepath.FromSlash(target), path); err != nil {
				t.Skipf("cannot create symbolic links: %v", err)
			}
			continue
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newReadFile builds a read_file tool, closed when the test ends, or fails
// the test.
func newReadFile(t *testing.T, cfg filetool.ReadFileConfig) tool.Tool {
	t.Helper()
	rf, err := filetool.ReadFile(cfg)
	if err != nil {
		t.Fatalf("ReadFile(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := rf.(io.Closer).Close(); err != nil {
			t.Errorf("read_file Close() = %v, want nil", err)
		}
	})
	return rf
}

// pathArgs returns the arguments {"path": path}.
func pathArgs(path string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"path": path})
	return b
}

// newPool builds a Pool of tools or fails the test.
func newPool(t *testing.T, cfg tool.PoolConfig, tools ...tool.Tool) *tool.Pool {
	t.Helper()
	p, err := tool.NewPool(tools, cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	return p
}

func TestReadFile(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	writeFiles(t, outside, map[string]string{"secret.txt": "secret"})
	writeFiles(t, root, map[string]string{
		"hello.txt":           "hello\n",
		"sub/inner.txt":       "inner",
		"sub/empty/.keep":     "",
		"empty.txt":           "",
		"exact.txt":           strings.Repeat("x", 100),
		"big.txt":             strings.Repeat("x", 101),
		"bin.dat":             "PK\x03\x04\x00\x00",
		"link_in":             "->sub/inner.txt",
		"link_in_dir":         "->sub",
		"link_out_abs":        "->" + filepath.Join(outside, "secret.txt"),
		"link_out_rel":        "->../outside/secret.txt",
		"link_out_dir":        "->../outside",
		"link_out_missing":    "->../outside/missing.txt",
		"sub/link_up":         "->../hello.txt",
		"dangling":            "->nothing.txt",
		"unicode/é 文件.md":     "# titre",
		"sub/link_out_nested": "->../../outside",
	})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}, MaxBytes: 100})
	absSecret := filepath.Join(outside, "secret.txt")

	tests := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{name: "file", path: "hello.txt", want: "hello\n"},
		{name: "nested file", path: "sub/inner.txt", want: "inner"},
		{name: "dot components", path: "./sub/../hello.txt", want: "hello\n"},
		{name: "empty file", path: "empty.txt", want: ""},
		{name: "file at the size limit", path: "exact.txt", want: strings.Repeat("x", 100)},
		{name: "non-ASCII name", path: "unicode/é 文件.md", want: "# titre"},
		{name: "symlink inside the root", path: "link_in", want: "inner"},
		{name: "through a symlinked directory", path: "link_in_dir/inner.txt", want: "inner"},
		{name: "symlink to a parent inside the root", path: "sub/link_up", want: "hello\n"},
		{name: "parent traversal", path: "../outside/secret.txt", wantErr: `path "../outside/secret.txt": path escapes the allowed roots`},
		{name: "traversal after a directory", path: "sub/../../outside/secret.txt", wantErr: `path "sub/../../outside/secret.txt": path escapes the allowed roots`},
		{name: "dot-dot alone", path: "..", wantErr: `path "..": path escapes the allowed roots`},
		{name: "absolute path", path: absSecret, wantErr: fmt.Sprintf("path %q: absolute paths are not allowed; give a path relative to the project directory", absSecret)},
		{name: "absolute path into the root", path: filepath.Join(root, "hello.txt"), wantErr: fmt.Sprintf("path %q: absolute paths are not allowed; give a path relative to the project directory", filepath.Join(root, "hello.txt"))},
		{name: "symlink to an absolute path outside", path: "link_out_abs", wantErr: `path "link_out_abs": path escapes the allowed roots`},
		{name: "symlink to a relative path outside", path: "link_out_rel", wantErr: `path "link_out_rel": path escapes the allowed roots`},
		{name: "through a symlinked directory outside", path: "link_out_dir/secret.txt", wantErr: `path "link_out_dir/secret.txt": path escapes the allowed roots`},
		{name: "through a nested symlink outside", path: "sub/link_out_nested/secret.txt", wantErr: `path "sub/link_out_nested/secret.txt": path escapes the allowed roots`},
		{name: "symlink to a missing file outside", path: "link_out_missing", wantErr: `path "link_out_missing": path escapes the allowed roots`},
		{name: "directory", path: "sub", wantErr: `path "sub": is a directory`},
		{name: "root itself", path: ".", wantErr: `path ".": is a directory`},
		{name: "over the size limit", path: "big.txt", wantErr: `path "big.txt": file is 101 bytes, over the limit of 100 bytes`},
		{name: "binary", path: "bin.dat", wantErr: `path "bin.dat": binary file`},
		{name: "missing", path: "missing.txt", wantErr: `path "missing.txt": file does not exist`},
		{name: "dangling symlink", path: "dangling", wantErr: `path "dangling": file does not exist`},
		{name: "below a file", path: "hello.txt/x", wantErr: `path "hello.txt/x": file does not exist`},
		{name: "empty path", path: "", wantErr: `path is empty; give a file path relative to the project directory, for example "README.md"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := rf.Call(t.Context(), pathArgs(tt.path))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("read_file(%q) = %q, %v, want error %q", tt.path, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("read_file(%q) = %q, %v, want %q, nil", tt.path, got, err, tt.want)
			}
		})
	}
}

func TestReadFileMissingWrapsErrNotExist(t *testing.T) {
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{t.TempDir()}})
	if _, err := rf.Call(t.Context(), pathArgs("nope.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read_file(nope.txt) error = %v, want it to wrap fs.ErrNotExist", err)
	}
}

func TestReadFileDefaultMaxBytes(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"limit.txt": strings.Repeat("a", filetool.DefaultMaxBytes),
		"over.txt":  strings.Repeat("a", filetool.DefaultMaxBytes+1),
		"late_nul":  strings.Repeat("a", 8<<10) + "\x00",
	})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}})
	if got, err := rf.Call(t.Context(), pathArgs("limit.txt")); err != nil || len(got) != filetool.DefaultMaxBytes {
		t.Errorf("read_file(limit.txt) = %d bytes, %v, want %d bytes, nil", len(got), err, filetool.DefaultMaxBytes)
	}
	want := `path "over.txt": file is 65537 bytes, over the limit of 65536 bytes`
	if _, err := rf.Call(t.Context(), pathArgs("over.txt")); err == nil || err.Error() != want {
		t.Errorf("read_file(over.txt) error = %v, want %q", err, want)
	}
	// Only the first 8 KiB are searched for NUL bytes.
	if got, err := rf.Call(t.Context(), pathArgs("late_nul")); err != nil || len(got) != 8<<10+1 {
		t.Errorf("read_file(late_nul) = %d bytes, %v, want %d bytes, nil", len(got), err, 8<<10+1)
	}
}

// TestReadFileDefaultMaxBytesFitsPool checks that a Pool with the default
// MaxResultBytes returns the largest file the default read_file accepts
// whole.
func TestReadFileDefaultMaxBytesFitsPool(t *testing.T) {
	root := t.TempDir()
	content := strings.Repeat("a", filetool.DefaultMaxBytes)
	writeFiles(t, root, map[string]string{"limit.txt": content})
	p, err := tool.NewPool([]tool.Tool{newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}})}, tool.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Call(t.Context(), "read_file", pathArgs("limit.txt")); err != nil || got != content {
		t.Errorf("Pool.Call(read_file, limit.txt) = %d bytes ending %q, %v, want the file's %d bytes", len(got), got[max(0, len(got)-40):], err, len(content))
	}
}

func TestReadFileClose(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeFiles(t, second, map[string]string{"a.txt": "a"})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{first, second}})
	if got, err := rf.Call(t.Context(), pathArgs("a.txt")); err != nil || got != "a" {
		t.Fatalf("read_file(a.txt) = %q, %v, want %q, nil", got, err, "a")
	}
	c, ok := rf.(io.Closer)
	if !ok {
		t.Fatalf("ReadFile() = %T, want an io.Closer", rf)
	}
	for i := range 2 {
		if err := c.Close(); err != nil {
			t.Errorf("Close() #%d = %v, want nil", i+1, err)
		}
	}
	want := `path "a.txt": file already closed`
	if got, err := rf.Call(t.Context(), pathArgs("a.txt")); err == nil || err.Error() != want {
		t.Errorf("read_file(a.txt) after Close = %q, %v, want error %q", got, err, want)
	}
}

func TestReadFileArguments(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "a"})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}})
	tests := []struct {
		name, args, want string
	}{
		{name: "missing path", args: `{}`, want: `tool: bad arguments: missing required argument "path"`},
		{name: "path not a string", args: `{"path":1}`, want: `tool: bad arguments: json: cannot unmarshal number into Go struct field .path of type string; want {"path": "<file path>"}`},
		{name: "unknown argument", args: `{"path":"a.txt","offset":1}`, want: `tool: bad arguments: json: unknown field "offset"; want {"path": "<file path>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rf.Call(t.Context(), json.RawMessage(tt.args))
			if !errors.Is(err, tool.ErrBadArguments) || err.Error() != tt.want {
				t.Errorf("read_file(%s) error = %v, want %q wrapping ErrBadArguments", tt.args, err, tt.want)
			}
		})
	}
}

func TestReadFileMultipleRoots(t *testing.T) {
	base := t.TempDir()
	first, second := filepath.Join(base, "first"), filepath.Join(base, "second")
	writeFiles(t, first, map[string]string{
		"both.txt":   "from first",
		"escape.txt": "->../second/only_second.txt",
	})
	writeFiles(t, second, map[string]string{
		"both.txt":        "from second",
		"only_second.txt": "second",
		"escape.txt":      "second's own",
		"dir/x.txt":       "x",
	})
	rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{first, second}})
	tests := []struct {
		path, want, wantErr string
	}{
		{path: "both.txt", want: "from first"},
		{path: "only_second.txt", want: "second"},
		{path: "dir/x.txt", want: "x"},
		{path: "neither.txt", wantErr: `path "neither.txt": file does not exist`},
		// The first root that has the path decides, even when it refuses.
		{path: "escape.txt", wantErr: `path "escape.txt": path escapes the allowed roots`},
	}
	for _, tt := range tests {
		got, err := rf.Call(t.Context(), pathArgs(tt.path))
		switch {
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("read_file(%q) = %q, %v, want error %q", tt.path, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("read_file(%q) = %q, %v, want %q, nil", tt.path, got, err, tt.want)
		}
	}
}

func TestReadFileThroughPool(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "alpha"})
	p := newPool(t, tool.PoolConfig{}, newReadFile(t, filetool.ReadFileConfig{Roots: []string{root}, Cacheable: true}))
	for range 2 {
		if got, err := p.Call(t.Context(), "read_file", json.RawMessage(`{"path": "a.txt"}`)); got != "alpha" || err != nil {
			t.Fatalf("Call(read_file, a.txt) = %q, %v, want alpha, nil", got, err)
		}
	}
	want := `tool read_file: path "../a.txt": path escapes the allowed roots`
	if _, err := p.Call(t.Context(), "read_file", json.RawMessage(`{"path": "../a.txt"}`)); err == nil || err.Error() != want {
		t.Errorf("Call(read_file, ../a.txt) error = %v, want %q", err, want)
	}
	wantStats := []tool.Stats{{Name: "read_file", Requested: 3, Executed: 2, CacheHits: 1, Errors: 1}}
	if diff := cmp.Diff(wantStats, p.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
}

func TestReadFileSpec(t *testing.T) {
	for _, cacheable := range []bool{false, true} {
		rf := newReadFile(t, filetool.ReadFileConfig{Roots: []string{t.TempDir()}, Cacheable: cacheable})
		spec := rf.Spec()
		if spec.Name != "read_file" || spec.Cacheable != cacheable || spec.Description == "" {
			t.Errorf("Spec() = {Name: %q, Cacheable: %v, Description: %q}, want read_file, %v and a description", spec.Name, spec.Cacheable, spec.Description, cacheable)
		}
		var got map[string]any
		if err := json.Unmarshal(spec.Parameters, &got); err != nil {
			t.Fatalf("Spec().Parameters = %s: %v", spec.Parameters, err)
		}
		props := got["properties"].(map[string]any)
		path := props["path"].(map[string]any)
		if path["description"] == "" {
			t.Error("Spec().Parameters: path has no description")
		}
		delete(path, "description")
		want := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"path": map[string]any{"type": "string"}},
			"required":             []any{"path"},
			"additionalProperties": false,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Spec().Parameters mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestReadFileConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"file.txt": "x"})
	missing := filepath.Join(dir, "missing")
	file := filepath.Join(dir, "file.txt")
	tests := []struct {
		name string
		cfg  filetool.ReadFileConfig
		want string
	}{
		{name: "no roots", cfg: filetool.ReadFileConfig{}, want: "tool: read_file: no Roots"},
		{name: "missing root", cfg: filetool.ReadFileConfig{Roots: []string{dir, missing}}, want: fmt.Sprintf("tool: read_file: root %q: ", missing)},
		{name: "root is a file", cfg: filetool.ReadFileConfig{Roots: []string{file}}, want: fmt.Sprintf("tool: read_file: root %q: ", file)},
		{name: "negative MaxBytes", cfg: filetool.ReadFileConfig{Roots: []string{dir}, MaxBytes: -1}, want: "tool: read_file: negative MaxBytes -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rf, err := filetool.ReadFile(tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("ReadFile(%+v) = %v, %v, want an error starting with %q", tt.cfg, rf, err, tt.want)
			}
		})
	}
	if _, err := filetool.ReadFile(filetool.ReadFileConfig{Roots: []string{missing}}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing root) error = %v, want it to wrap fs.ErrNotExist", err)
	}
}
