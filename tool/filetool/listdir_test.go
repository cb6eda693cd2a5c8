package filetool_test

import (
	"context"
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

// newListDir builds a list_dir tool, closed when the test ends, or fails the
// test.
func newListDir(t *testing.T, cfg filetool.ListDirConfig) tool.Tool {
	t.Helper()
	ld, err := filetool.ListDir(cfg)
	if err != nil {
		t.Fatalf("ListDir(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := ld.(io.Closer).Close(); err != nil {
			t.Errorf("list_dir Close() = %v, want nil", err)
		}
	})
	return ld
}

func TestListDir(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	writeFiles(t, outside, map[string]string{"secret.txt": "secret", "sub/x": "x"})
	writeFiles(t, root, map[string]string{
		"hello.txt":           "hello\n",
		"b.md":                "# b",
		"sub/inner.txt":       "inner",
		"sub/deeper/z.txt":    "zz",
		"empty/.keep":         "",
		"link_in":             "->sub/inner.txt",
		"link_in_dir":         "->sub",
		"link_out_abs":        "->" + outside,
		"link_out_rel":        "->../outside",
		"link_out_file":       "->../outside/secret.txt",
		"sub/link_out_nested": "->../../outside",
		"dangling":            "->nothing",
		"unicode/é 文件.md":     "# titre",
		"Upper.txt":           "u",
	})
	if err := os.Remove(filepath.Join(root, "empty", ".keep")); err != nil {
		t.Fatal(err)
	}
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{root}})
	rootListing := strings.Join([]string{
		"Upper.txt  1 bytes",
		"b.md  3 bytes",
		"dangling -> (symlink)",
		"empty/",
		"hello.txt  6 bytes",
		"link_in -> (symlink)",
		"link_in_dir -> (symlink)",
		"link_out_abs -> (symlink)",
		"link_out_file -> (symlink)",
		"link_out_rel -> (symlink)",
		"sub/",
		"unicode/",
	}, "\n")
	subListing := "deeper/\ninner.txt  5 bytes\nlink_out_nested -> (symlink)"
	absOutside := filepath.Join(outside, "sub")

	tests := []struct {
		name    string
		args    string
		want    string
		wantErr string
	}{
		{name: "root by default", args: `{}`, want: rootListing},
		{name: "root by empty path", args: `{"path":""}`, want: rootListing},
		{name: "root by null path", args: `{"path":null}`, want: rootListing},
		{name: "root by dot", args: `{"path":"."}`, want: rootListing},
		{name: "subdirectory", args: `{"path":"sub"}`, want: subListing},
		{name: "trailing slash", args: `{"path":"sub/"}`, want: subListing},
		{name: "dot components", args: `{"path":"./sub/deeper/../"}`, want: subListing},
		{name: "nested", args: `{"path":"sub/deeper"}`, want: "z.txt  2 bytes"},
		{name: "non-ASCII names", args: `{"path":"unicode"}`, want: "é 文件.md  7 bytes"},
		{name: "empty directory", args: `{"path":"empty"}`, want: "(empty directory)"},
		{name: "through a symlinked directory inside", args: `{"path":"link_in_dir"}`, want: subListing},
		{name: "parent traversal", args: `{"path":"../outside"}`, wantErr: `path "../outside": path escapes the allowed roots`},
		{name: "dot-dot alone", args: `{"path":".."}`, wantErr: `path "..": path escapes the allowed roots`},
		{name: "dot-dot slash", args: `{"path":"../"}`, wantErr: `path "../": path escapes the allowed roots`},
		{name: "traversal after a directory", args: `{"path":"sub/../../outside"}`, wantErr: `path "sub/../../outside": path escapes the allowed roots`},
		{name: "absolute path", args: string(pathArgs(absOutside)), wantErr: fmt.Sprintf("path %q: absolute paths are not allowed; give a path relative to the project directory", absOutside)},
		{name: "absolute root", args: `{"path":"/"}`, wantErr: `path "/": absolute paths are not allowed; give a path relative to the project directory`},
		{name: "absolute path into the root", args: string(pathArgs(filepath.Join(root, "sub"))), wantErr: fmt.Sprintf("path %q: absolute paths are not allowed; give a path relative to the project directory", filepath.Join(root, "sub"))},
		{name: "symlink to an absolute directory outside", args: `{"path":"link_out_abs"}`, wantErr: `path "link_out_abs": path escapes the allowed roots`},
		{name: "symlink to a relative directory outside", args: `{"path":"link_out_rel"}`, wantErr: `path "link_out_rel": path escapes the allowed roots`},
		{name: "below a symlink outside", args: `{"path":"link_out_rel/sub"}`, wantErr: `path "link_out_rel/sub": path escapes the allowed roots`},
		{name: "nested symlink outside", args: `{"path":"sub/link_out_nested"}`, wantErr: `path "sub/link_out_nested": path escapes the allowed roots`},
		{name: "symlink to a file outside", args: `{"path":"link_out_file"}`, wantErr: `path "link_out_file": path escapes the allowed roots`},
		{name: "file", args: `{"path":"hello.txt"}`, wantErr: `path "hello.txt": not a directory`},
		{name: "symlink to a file inside", args: `{"path":"link_in"}`, wantErr: `path "link_in": not a directory`},
		{name: "missing", args: `{"path":"nope"}`, wantErr: `path "nope": file does not exist`},
		{name: "dangling symlink", args: `{"path":"dangling"}`, wantErr: `path "dangling": file does not exist`},
		{name: "below a file", args: `{"path":"hello.txt/x"}`, wantErr: `path "hello.txt/x": file does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ld.Call(t.Context(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("list_dir(%s) = %q, %v, want error %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("list_dir(%s) error = %v, want nil", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("list_dir(%s) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestListDirMissingWrapsErrNotExist(t *testing.T) {
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{t.TempDir()}})
	if _, err := ld.Call(t.Context(), pathArgs("nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list_dir(nope) error = %v, want it to wrap fs.ErrNotExist", err)
	}
}

func TestListDirTruncation(t *testing.T) {
	root := t.TempDir()
	// 1100 entries: more than one read chunk of 1024, so that small limits
	// cut the listing while it is read as well as at the end.
	for i := range 1100 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%04d", 1099-i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		maxEntries int
		wantFirst  string
		wantLast   string
		wantLines  int
	}{
		{name: "default", maxEntries: 0, wantFirst: "f0000  0 bytes", wantLast: "[truncated: 100 more entries]", wantLines: filetool.DefaultMaxEntries + 1},
		{name: "small", maxEntries: 3, wantFirst: "f0000  0 bytes", wantLast: "[truncated: 1097 more entries]", wantLines: 4},
		{name: "one", maxEntries: 1, wantFirst: "f0000  0 bytes", wantLast: "[truncated: 1099 more entries]", wantLines: 2},
		{name: "exactly all", maxEntries: 1100, wantFirst: "f0000  0 bytes", wantLast: "f1099  0 bytes", wantLines: 1100},
		{name: "more than all", maxEntries: 5000, wantFirst: "f0000  0 bytes", wantLast: "f1099  0 bytes", wantLines: 1100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ld := newListDir(t, filetool.ListDirConfig{Roots: []string{root}, MaxEntries: tt.maxEntries})
			got, err := ld.Call(t.Context(), json.RawMessage(`{}`))
			if err != nil {
				t.Fatalf("list_dir() error = %v", err)
			}
			lines := strings.Split(got, "\n")
			if len(lines) != tt.wantLines || lines[0] != tt.wantFirst || lines[len(lines)-1] != tt.wantLast {
				t.Fatalf("list_dir() = %d lines from %q to %q, want %d lines from %q to %q",
					len(lines), lines[0], lines[len(lines)-1], tt.wantLines, tt.wantFirst, tt.wantLast)
			}
			// The kept entries are the first by name, in order.
			entries := lines
			if strings.HasPrefix(tt.wantLast, "[truncated") {
				entries = lines[:len(lines)-1]
			}
			for i, line := range entries {
				if want := fmt.Sprintf("f%04d  0 bytes", i); line != want {
					t.Fatalf("list_dir() line %d = %q, want %q", i, line, want)
				}
			}
		})
	}
}

func TestListDirArguments(t *testing.T) {
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{t.TempDir()}})
	tests := []struct {
		name, args, want string
	}{
		{name: "path not a string", args: `{"path":1}`, want: `tool: bad arguments: json: cannot unmarshal number into Go struct field .path of type string; want {"path": "<directory path>"}`},
		{name: "unknown argument", args: `{"path":".","recursive":true}`, want: `tool: bad arguments: json: unknown field "recursive"; want {"path": "<directory path>"}`},
		{name: "not an object", args: `[]`, want: `tool: bad arguments: json: cannot unmarshal array into Go value of type struct { Path *string "json:\"path\"" }; want {"path": "<directory path>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ld.Call(t.Context(), json.RawMessage(tt.args))
			if !errors.Is(err, tool.ErrBadArguments) || err.Error() != tt.want {
				t.Errorf("list_dir(%s) error = %v, want %q wrapping ErrBadArguments", tt.args, err, tt.want)
			}
		})
	}
}

func TestListDirMultipleRoots(t *testing.T) {
	base := t.TempDir()
	first, second := filepath.Join(base, "first"), filepath.Join(base, "second")
	writeFiles(t, first, map[string]string{
		"both/a.txt":     "a",
		"file_first":     "x",
		"escape":         "->../second/only_second",
		"first_only/b.c": "bb",
	})
	writeFiles(t, second, map[string]string{
		"both/z.txt":        "z",
		"only_second/y.txt": "yy",
		"file_first/w.txt":  "w",
		"escape/v.txt":      "v",
	})
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{first, second}})
	tests := []struct {
		path, want, wantErr string
	}{
		{path: ".", want: "both/\nescape -> (symlink)\nfile_first  1 bytes\nfirst_only/"},
		{path: "both", want: "a.txt  1 bytes"},
		{path: "only_second", want: "y.txt  2 bytes"},
		{path: "neither", wantErr: `path "neither": file does not exist`},
		// The first root that has the path decides, even when it refuses.
		{path: "file_first", wantErr: `path "file_first": not a directory`},
		{path: "escape", wantErr: `path "escape": path escapes the allowed roots`},
	}
	for _, tt := range tests {
		got, err := ld.Call(t.Context(), pathArgs(tt.path))
		switch {
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("list_dir(%q) = %q, %v, want error %q", tt.path, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("list_dir(%q) = %q, %v, want %q, nil", tt.path, got, err, tt.want)
		}
	}
}

func TestListDirClose(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeFiles(t, second, map[string]string{"sub/a.txt": "a"})
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{first, second}})
	if got, err := ld.Call(t.Context(), pathArgs("sub")); err != nil || got != "a.txt  1 bytes" {
		t.Fatalf("list_dir(sub) = %q, %v, want %q, nil", got, err, "a.txt  1 bytes")
	}
	c, ok := ld.(io.Closer)
	if !ok {
		t.Fatalf("ListDir() = %T, want an io.Closer", ld)
	}
	for i := range 2 {
		if err := c.Close(); err != nil {
			t.Errorf("Close() #%d = %v, want nil", i+1, err)
		}
	}
	want := `path "sub": file already closed`
	if got, err := ld.Call(t.Context(), pathArgs("sub")); err == nil || err.Error() != want {
		t.Errorf("list_dir(sub) after Close = %q, %v, want error %q", got, err, want)
	}
}

func TestListDirCancelled(t *testing.T) {
	ld := newListDir(t, filetool.ListDirConfig{Roots: []string{t.TempDir()}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := ld.Call(ctx, json.RawMessage(`{}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("list_dir() with a cancelled context = %q, %v, want context.Canceled", got, err)
	}
}

func TestListDirThroughPool(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "alpha"})
	p := newPool(t, tool.PoolConfig{}, newListDir(t, filetool.ListDirConfig{Roots: []string{root}, Cacheable: true}))
	for _, args := range []string{`{}`, `{"path": "."}`} {
		if got, err := p.Call(t.Context(), "list_dir", json.RawMessage(args)); got != "a.txt  5 bytes" || err != nil {
			t.Fatalf("Call(list_dir, %s) = %q, %v, want %q, nil", args, got, err, "a.txt  5 bytes")
		}
	}
	want := `tool list_dir: path "..": path escapes the allowed roots`
	if _, err := p.Call(t.Context(), "list_dir", json.RawMessage(`{"path": ".."}`)); err == nil || err.Error() != want {
		t.Errorf("Call(list_dir, ..) error = %v, want %q", err, want)
	}
	// {} and {"path": "."} are different arguments: both execute.
	wantStats := []tool.Stats{{Name: "list_dir", Requested: 3, Executed: 3, Errors: 1}}
	if diff := cmp.Diff(wantStats, p.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
}

func TestListDirSpec(t *testing.T) {
	for _, cacheable := range []bool{false, true} {
		ld := newListDir(t, filetool.ListDirConfig{Roots: []string{t.TempDir()}, Cacheable: cacheable})
		spec := ld.Spec()
		if spec.Name != "list_dir" || spec.Cacheable != cacheable || !strings.Contains(spec.Description, "At most 1000 entries") {
			t.Errorf("Spec() = {Name: %q, Cacheable: %v, Description: %q}, want list_dir, %v and a description naming the limit", spec.Name, spec.Cacheable, spec.Description, cacheable)
		}
		var got map[string]any
		if err := json.Unmarshal(spec.Parameters, &got); err != nil {
			t.Fatalf("Spec().Parameters = %s: %v", spec.Parameters, err)
		}
		path := got["properties"].(map[string]any)["path"].(map[string]any)
		if path["description"] == "" {
			t.Error("Spec().Parameters: path has no description")
		}
		delete(path, "description")
		want := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"path": map[string]any{"type": "string"}},
			"additionalProperties": false,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Spec().Parameters mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestListDirConfigErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"file.txt": "x"})
	missing := filepath.Join(dir, "missing")
	file := filepath.Join(dir, "file.txt")
	tests := []struct {
		name string
		cfg  filetool.ListDirConfig
		want string
	}{
		{name: "no roots", cfg: filetool.ListDirConfig{}, want: "tool: list_dir: no Roots"},
		{name: "missing root", cfg: filetool.ListDirConfig{Roots: []string{dir, missing}}, want: fmt.Sprintf("tool: list_dir: root %q: ", missing)},
		{name: "root is a file", cfg: filetool.ListDirConfig{Roots: []string{file}}, want: fmt.Sprintf("tool: list_dir: root %q: ", file)},
		{name: "negative MaxEntries", cfg: filetool.ListDirConfig{Roots: []string{dir}, MaxEntries: -1}, want: "tool: list_dir: negative MaxEntries -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ld, err := filetool.ListDir(tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("ListDir(%+v) = %v, %v, want an error starting with %q", tt.cfg, ld, err, tt.want)
			}
		})
	}
	if _, err := filetool.ListDir(filetool.ListDirConfig{Roots: []string{missing}}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ListDir(missing root) error = %v, want it to wrap fs.ErrNotExist", err)
	}
}

// FuzzListDirPath lists arbitrary paths of a root that has symbolic links
// leading out of it, next to a directory with a secret entry: whatever the
// path, nothing of the outside directory may be listed.
func FuzzListDirPath(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, dir := range []string{filepath.Join(root, "sub", "deep"), outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "SECRET_ENTRY"), nil, 0o644); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{"out_rel": "../outside", "sub/out_nested": "../../outside", "out_abs": outside, "in": "sub"} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(name))); err != nil {
			f.Skipf("cannot create symbolic links: %v", err)
		}
	}
	ld, err := filetool.ListDir(filetool.ListDirConfig{Roots: []string{root}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", ".", "sub", "in/deep", "..", "../outside", "out_rel", "out_abs", "sub/out_nested", "in/../out_rel", outside, "sub/./../..", "sub\x00", "./././in"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got, err := ld.Call(t.Context(), pathArgs(path))
		if strings.Contains(got, "SECRET_ENTRY") {
			t.Fatalf("list_dir(%q) = %q, which lists the outside directory", path, got)
		}
		if err != nil && got != "" {
			t.Fatalf("list_dir(%q) = %q, %v, want no output with an error", path, got, err)
		}
	})
}
