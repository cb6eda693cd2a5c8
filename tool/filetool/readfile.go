package filetool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
	"github.com/batchagent/batchagent/tool"
)

// DefaultMaxBytes is the default [ReadFileConfig.MaxBytes]. It is
// [tool.DefaultMaxResultBytes], so that a [tool.Pool] with the default
// [tool.PoolConfig.MaxResultBytes] returns every file read_file accepts whole.
const DefaultMaxBytes = tool.DefaultMaxResultBytes

// DefaultMaxMediaBytes is the default [ReadFileConfig.MaxMediaBytes]:
// [tool.DefaultMaxMediaBytes], 20 MiB.
const DefaultMaxMediaBytes = tool.DefaultMaxMediaBytes

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
	// MaxMediaBytes is the largest image or PDF the tool returns as
	// media; larger ones are refused with an error naming the size and
	// the limit. Defaults to DefaultMaxMediaBytes; negative is an error.
	// A [tool.Pool] also bounds media by [tool.PoolConfig.MaxMediaBytes].
	MaxMediaBytes int64
	// Cacheable marks the tool cacheable ([tool.Spec.Cacheable]): set it
	// when the files do not change while a job runs.
	Cacheable bool
}

// readFile is the read_file tool.
type readFile struct {
	spec          tool.Spec
	roots         []*os.Root
	maxBytes      int64
	maxMediaBytes int64
}

// content is what read_file returns: a text file's text, or an image's or
// PDF's short description and its media part.
type content struct {
	text  string
	media []llm.Part
}

// ReadFile returns the read_file tool, which returns the contents of a text
// file, or an image (PNG, JPEG, GIF, WebP) or a PDF as a media part. The
// tool is a [tool.MediaTool]: a [tool.Pool] calls CallMedia, which returns
// a media file as a short text ("photos/cat.png: image/png, 640×480") and
// one [llm.Part] of kind image or file holding its bytes, MediaType
// (sniffed from the bytes, which must be well-formed), Width and Height
// or Pages, Filename (the base name), Ref (the path as given) and Hash
// (the bytes' SHA-256, hex). Its Call, for callers that take text only,
// refuses media files as binary files. Its arguments are {"path": string}, a path relative to a root; with
// several roots, the first root that has the path wins. It is safe for
// concurrent use.
//
// Every file is opened through an [os.Root], so a path that leaves its root,
// by "..", by being absolute or through a symbolic link, is refused; symbolic
// links that stay inside the root are followed. Also refused, with an error
// text meant for the model: an empty path, directories, files that are not
// regular, text files over MaxBytes, images and PDFs over MaxMediaBytes,
// malformed images and PDFs and other binary files (a NUL byte in the
// first 8 KiB). A missing file's error wraps [fs.ErrNotExist].
//
// ReadFile fails if Roots is empty, a root cannot be opened as a directory, or
// MaxBytes or MaxMediaBytes is negative. The roots stay open until the tool is closed: it
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
	if cfg.MaxMediaBytes == 0 {
		cfg.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if cfg.MaxMediaBytes < 0 {
		return nil, fmt.Errorf("tool: read_file: negative MaxMediaBytes %d", cfg.MaxMediaBytes)
	}
	roots, err := openRoots("read_file", cfg.Roots)
	if err != nil {
		return nil, err
	}
	t := &readFile{maxBytes: cfg.MaxBytes, maxMediaBytes: cfg.MaxMediaBytes, roots: roots}
	t.spec = tool.Spec{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file and return its contents; "+
			"an image (PNG, JPEG, GIF, WebP) or a PDF is returned as an attachment you can see, where you can take one. "+
			"The path is relative to the project directory, for example \"src/main.go\"; "+
			"absolute paths and paths leading outside the project are refused, "+
			"as are directories, other binary files, text files over %d bytes and images and PDFs over %d bytes.",
			cfg.MaxBytes, cfg.MaxMediaBytes),
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string",` +
			`"description":"Path of the file, relative to the project directory, for example \"src/main.go\"."}},` +
			`"required":["path"],"additionalProperties":false}`),
		Cacheable: cfg.Cacheable,
	}
	return t, nil
}

func (t *readFile) Spec() tool.Spec { return t.spec }

// Call returns a text file's contents; an image or PDF is refused as a
// binary file, as it is to callers that take text only.
func (t *readFile) Call(ctx context.Context, args json.RawMessage) (string, error) {
	c, err := t.call(ctx, args)
	if err != nil {
		return "", err
	}
	if len(c.media) > 0 {
		return "", fmt.Errorf("path %q: binary file (%s)", c.media[0].Ref, c.media[0].MediaType)
	}
	return c.text, nil
}

// CallMedia returns a text file's contents, or an image or PDF as a media
// part with a short description; see [ReadFile].
func (t *readFile) CallMedia(ctx context.Context, args json.RawMessage) (string, []llm.Part, error) {
	c, err := t.call(ctx, args)
	return c.text, c.media, err
}

// call decodes args and reads the file they name.
func (t *readFile) call(ctx context.Context, args json.RawMessage) (content, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := tool.DecodeArgs(args, &a, `{"path": "<file path>"}`); err != nil {
		return content{}, err
	}
	if a.Path == nil {
		return content{}, fmt.Errorf(`%w: missing required argument "path"`, tool.ErrBadArguments)
	}
	path := *a.Path
	if path == "" {
		return content{}, errors.New(`path is empty; give a file path relative to the project directory, for example "README.md"`)
	}
	return inRoots(ctx, t.roots, path, t.read)
}

// Close closes the tool's roots; see [ReadFile].
func (t *readFile) Close() error { return closeRoots(t.roots) }

// read reads path in r.
func (t *readFile) read(r *os.Root, path string) (content, error) {
	info, err := r.Stat(path)
	if err != nil {
		return content{}, openError(path, err)
	}
	switch {
	case info.IsDir():
		return content{}, fmt.Errorf("path %q: is a directory", path)
	case !info.Mode().IsRegular():
		return content{}, fmt.Errorf("path %q: not a regular file", path)
	}
	f, err := r.Open(path)
	if err != nil {
		return content{}, openError(path, err)
	}
	defer f.Close()
	// The first bytes tell an image or a PDF, which has a limit of its own.
	var head [12]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return content{}, fmt.Errorf("path %q: %v", path, unwrapPath(err))
	}
	isMedia := mediaKind(head[:n]) != ""
	limit, what := t.maxBytes, ""
	if isMedia {
		limit, what = t.maxMediaBytes, " for images and PDFs"
	}
	if info.Size() > limit {
		return content{}, tooLarge(path, info.Size(), limit, what)
	}
	data, err := readAll(f, head[:n], info.Size(), limit)
	if err != nil {
		return content{}, fmt.Errorf("path %q: %v", path, unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return content{}, tooLarge(path, int64(len(data)), limit, what)
	}
	if isMedia {
		return mediaContent(path, data)
	}
	if bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
		return content{}, fmt.Errorf("path %q: binary file", path)
	}
	return content{text: string(data)}, nil
}

// readAll returns head followed by the rest of f, which Stat said is size
// bytes in all: it reads that and one byte more, to notice that the file
// grew since, and if it did, reads on up to one byte past limit.
func readAll(f io.Reader, head []byte, size, limit int64) ([]byte, error) {
	data := make([]byte, max(size+1, int64(len(head))))
	copy(data, head)
	if int64(len(head)) < size+1 {
		n, err := io.ReadFull(f, data[len(head):])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return data[:len(head)+n], nil
		default:
			return nil, err
		}
	}
	rest, err := io.ReadAll(io.LimitReader(f, limit-int64(len(data))+1))
	if err != nil {
		return nil, err
	}
	return append(data, rest...), nil
}

// mediaKind returns the kind of part a file starting with head is: an
// image (PNG, JPEG, GIF, WebP) or a file (PDF); "" for anything else.
func mediaKind(head []byte) llm.PartKind {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")), bytes.HasPrefix(head, []byte("\xff\xd8\xff")),
		bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")),
		len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return llm.PartImage
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return llm.PartFile
	}
	return ""
}

// mediaContent returns an image's or PDF's bytes, read from path, as a
// media part and its description; malformed bytes are an error.
func mediaContent(path string, data []byte) (content, error) {
	info, err := media.Sniff(data)
	if err != nil {
		return content{}, fmt.Errorf("path %q: not a valid image or PDF: %v", path, err)
	}
	sum := sha256.Sum256(data)
	p := llm.Part{
		Kind:      mediaKind(data),
		Data:      data,
		MediaType: info.MediaType,
		Width:     info.Width,
		Height:    info.Height,
		Pages:     info.Pages,
		Filename:  filepath.Base(path),
		Ref:       path,
		Hash:      hex.EncodeToString(sum[:]),
	}
	text := fmt.Sprintf("%s: %s, %d×%d", path, info.MediaType, info.Width, info.Height)
	if p.Kind == llm.PartFile {
		switch info.Pages {
		case 0: // page objects in compressed streams: unknown
			text = fmt.Sprintf("%s: %s", path, info.MediaType)
		case 1:
			text = fmt.Sprintf("%s: %s, 1 page", path, info.MediaType)
		default:
			text = fmt.Sprintf("%s: %s, %d pages", path, info.MediaType, info.Pages)
		}
	}
	return content{text: text, media: []llm.Part{p}}, nil
}

// tooLarge is the error of a file of size bytes over limit; what says
// which limit ("" for text files).
func tooLarge(path string, size, limit int64, what string) error {
	return fmt.Errorf("path %q: file is %d bytes, over the limit of %d bytes%s", path, size, limit, what)
}
