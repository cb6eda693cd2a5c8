package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchagent/batchagent/internal/netguard"
	"github.com/batchagent/batchagent/llm"
)

// DefaultMaxBytes is the default [LoaderConfig.MaxBytes]: 20 MiB, what
// OpenAI and Anthropic take for one image.
const DefaultMaxBytes = 20 << 20

// Limits of the loader's own HTTP client.
const (
	fetchTimeout   = 60 * time.Second
	maxRedirects   = 5
	maxHeaderBytes = 64 << 10
)

// LoaderConfig configures a [Loader].
type LoaderConfig struct {
	// Roots are absolute directories a path reference may name files
	// under, tried in order. Files are opened through [os.Root]: no "..",
	// no symlink out of the root.
	Roots []string
	// MaxBytes caps one item's bytes: files, fetched URLs and data: URLs.
	// Defaults to DefaultMaxBytes (20 MiB); negative is an error.
	MaxBytes int64
	// Fetch are host patterns (http_get's syntax: "cdn.example.com",
	// "*.example.com", an IP address, each optionally with a port) whose
	// https URLs the loader may fetch, or pass on. None: URLs are not
	// fetched, and passed on (PassURLs) whatever their host.
	Fetch []string
	// PassURLs sends https URLs to the provider as URLs (it fetches them)
	// instead of fetching them here; still only hosts in Fetch when Fetch
	// is set.
	PassURLs bool
	// AllowPrivate, for tests only, allows loopback, private and
	// link-local addresses and plain http:// URLs (as http_get's
	// AllowPrivate).
	AllowPrivate bool
	// Client fetches URLs. Defaults to a client whose dialer refuses
	// loopback, private and link-local addresses (http_get's guard) and
	// which uses no proxy. A Client given here is used as it is, but for
	// its redirect check: guarding its dialer is the caller's duty.
	Client *http.Client
}

// A LoadError is a media reference that could not be loaded.
type LoadError struct {
	// Ref is the reference as given; "" for a data: URL (the input holds
	// it, and the error does not repeat its payload).
	Ref string
	// Err is the reason.
	Err error
}

func (e *LoadError) Error() string {
	if e.Ref == "" {
		return e.Err.Error()
	}
	return e.Ref + ": " + e.Err.Error()
}

func (e *LoadError) Unwrap() error { return e.Err }

// A Loader reads the media that references name: files under its roots,
// https URLs (fetched through an SSRF guard, or passed on) and data: URLs.
// It is safe for concurrent use; Close releases its roots.
type Loader struct {
	roots        []root
	maxBytes     int64
	hosts        netguard.Hosts
	passURLs     bool
	allowPrivate bool
	client       *http.Client
}

// root is one opened media root.
type root struct {
	dir string // absolute and clean
	r   *os.Root
}

// NewLoader returns a Loader for cfg. It fails, naming the entry, on a
// root that is not an absolute directory, a malformed Fetch pattern or a
// negative MaxBytes.
func NewLoader(cfg LoaderConfig) (*Loader, error) {
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("media: negative max_bytes %d", cfg.MaxBytes)
	}
	l := &Loader{
		maxBytes:     cfg.MaxBytes,
		passURLs:     cfg.PassURLs,
		allowPrivate: cfg.AllowPrivate,
	}
	if l.maxBytes == 0 {
		l.maxBytes = DefaultMaxBytes
	}
	hosts, err := netguard.ParseHosts(cfg.Fetch)
	if err != nil {
		var ee *netguard.EntryError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("media: fetch[%d] %q: %w", ee.Index, ee.Entry, ee.Err)
		}
		return nil, fmt.Errorf("media: fetch: %w", err)
	}
	l.hosts = hosts
	for i, dir := range cfg.Roots {
		if !filepath.IsAbs(dir) {
			l.Close()
			return nil, fmt.Errorf("media: roots[%d] %q is not an absolute path", i, dir)
		}
		r, err := os.OpenRoot(dir)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("media: roots[%d]: %w", i, err)
		}
		l.roots = append(l.roots, root{dir: filepath.Clean(dir), r: r})
	}
	l.client = cfg.Client
	if l.client == nil {
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		if !cfg.AllowPrivate {
			dialer.Control = netguard.Control
		}
		l.client = &http.Client{
			Timeout: fetchTimeout,
			Transport: &http.Transport{
				Proxy:                  nil, // a proxy would be the address checked, not the host
				DialContext:            dialer.DialContext,
				DisableKeepAlives:      true,
				MaxResponseHeaderBytes: maxHeaderBytes,
				TLSHandshakeTimeout:    10 * time.Second,
			},
		}
	}
	return l, nil
}

// Close releases the loader's roots. Loads after Close fail.
func (l *Loader) Close() error {
	var errs []error
	for _, r := range l.roots {
		errs = append(errs, r.r.Close())
	}
	return errors.Join(errs...)
}

// Load reads the media ref names as a part of the given kind
// (llm.PartImage, llm.PartAudio or llm.PartFile):
//
//   - a path under a root: Data, MediaType (sniffed; a known extension must
//     agree), Width/Height or Pages, Filename, Ref and Hash (SHA-256 hex);
//   - an https URL with PassURLs: Kind, URL and Ref only;
//   - an https URL otherwise: fetched through the guard and read as a
//     path is, with Ref the URL;
//   - a data: URL: URL, MediaType and Width/Height or Pages, strictly
//     checked (base64, declared type matches the bytes).
//
// The media's type must fit kind. Every error is a *[LoadError].
func (l *Loader) Load(ctx context.Context, kind llm.PartKind, ref string) (llm.Part, error) {
	if err := checkKind(kind); err != nil {
		return llm.Part{}, &LoadError{Ref: ref, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return llm.Part{}, &LoadError{Ref: shortRef(ref), Err: err}
	}
	switch scheme(ref) {
	case "data":
		return l.loadDataURL(kind, ref)
	case "http", "https":
		u, err := l.parseURL(ref)
		if err != nil {
			return llm.Part{}, &LoadError{Ref: ref, Err: err}
		}
		if l.passURLs {
			// No bytes to sniff: a known extension must fit the kind.
			if typ := extType(u.Path); typ != "" {
				if err := fits(kind, typ); err != nil {
					return llm.Part{}, &LoadError{Ref: ref, Err: fmt.Errorf("by its extension %w", err)}
				}
			}
			return llm.Part{Kind: kind, URL: ref, Ref: ref}, nil
		}
		var data []byte
		declared, err := l.fetch(ctx, u, func(r io.Reader) error {
			var err error
			data, err = io.ReadAll(r)
			return err
		})
		if err != nil {
			return llm.Part{}, &LoadError{Ref: ref, Err: err}
		}
		if declared == "" {
			declared = extType(u.Path)
		}
		name := path.Base(u.Path)
		if name == "/" || name == "." {
			name = ""
		}
		return l.part(kind, ref, name, declared, data)
	case "":
		data, err := l.readPath(ctx, ref, readAll)
		if err != nil {
			return llm.Part{}, &LoadError{Ref: ref, Err: err}
		}
		return l.part(kind, ref, filepath.Base(ref), extType(ref), data)
	default:
		return llm.Part{}, &LoadError{Ref: ref, Err: fmt.Errorf("scheme %q is not allowed; give a path under the media roots, an https URL or a data: URL", scheme(ref))}
	}
}

// Hash returns the SHA-256 (hex) of what ref names now, read through the
// same jail, guard and size cap as Load and streamed, in bounded memory:
// what a resumed agent compares with the hash its checkpoint kept. An
// https URL is fetched even with PassURLs, but only from a host in Fetch.
// Every error is a *[LoadError].
func (l *Loader) Hash(ctx context.Context, ref string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &LoadError{Ref: shortRef(ref), Err: err}
	}
	h := sha256.New()
	switch scheme(ref) {
	case "data":
		_, data, err := DecodeDataURL(ref, l.maxBytes)
		if err != nil {
			return "", dataURLLoadError(err)
		}
		h.Write(data)
	case "http", "https":
		u, err := l.parseURL(ref)
		if err != nil {
			return "", &LoadError{Ref: ref, Err: err}
		}
		if l.hosts.Len() == 0 {
			// Passed on from any host: the loader fetches only from hosts
			// in Fetch.
			return "", &LoadError{Ref: ref, Err: errors.New("not fetched: URLs are passed to the provider, and media.fetch names no host to fetch from")}
		}
		if _, err := l.fetch(ctx, u, func(r io.Reader) error { _, err := io.Copy(h, r); return err }); err != nil {
			return "", &LoadError{Ref: ref, Err: err}
		}
	case "":
		_, err := l.readPath(ctx, ref, func(r io.Reader, _ int64) ([]byte, error) { _, err := io.Copy(h, r); return nil, err })
		if err != nil {
			return "", &LoadError{Ref: ref, Err: err}
		}
	default:
		return "", &LoadError{Ref: ref, Err: fmt.Errorf("scheme %q is not allowed; give a path under the media roots, an https URL or a data: URL", scheme(ref))}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkKind refuses a kind that is not media.
func checkKind(kind llm.PartKind) error {
	switch kind {
	case llm.PartImage, llm.PartAudio, llm.PartFile:
		return nil
	}
	return fmt.Errorf("part kind %q is not a media kind (image, audio or file)", kind)
}

// scheme returns ref's URL scheme, lower case, or "" for a path. A
// Windows drive letter ("C:") is not a scheme.
func scheme(ref string) string {
	i := strings.IndexByte(ref, ':')
	if i < 2 {
		return ""
	}
	for j := range i {
		c := ref[j]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(ref[:i])
}

// shortRef is ref for an error: "" for a data: URL, whose payload an
// error does not repeat.
func shortRef(ref string) string {
	if scheme(ref) == "data" {
		return ""
	}
	return ref
}

// part checks data against the declared type (from the extension or
// Content-Type; "" for none) and kind, and makes the part.
func (l *Loader) part(kind llm.PartKind, ref, name, declared string, data []byte) (llm.Part, error) {
	info, err := sniffAs(kind, declared, data)
	if err != nil {
		return llm.Part{}, &LoadError{Ref: ref, Err: err}
	}
	sum := sha256.Sum256(data)
	return llm.Part{
		Kind:      kind,
		Data:      data,
		MediaType: info.MediaType,
		Width:     info.Width,
		Height:    info.Height,
		Pages:     info.Pages,
		Filename:  name,
		Ref:       ref,
		Hash:      hex.EncodeToString(sum[:]),
	}, nil
}

// sniffAs sniffs data, checks it against the declared type ("" for none)
// and that it fits kind.
func sniffAs(kind llm.PartKind, declared string, data []byte) (Info, error) {
	info, err := Sniff(data)
	switch {
	case err != nil && declared != "" && errors.Is(err, ErrUnknownType):
		return Info{}, fmt.Errorf("declared %s but the bytes are not of a known type (%d bytes, starting %q)", declared, len(data), data[:min(len(data), 8)])
	case err != nil && errors.Is(err, ErrUnknownType):
		return Info{}, fmt.Errorf("not a known media type (%d bytes, starting %q); images (PNG, JPEG, GIF, WebP), audio (WAV, MP3) and PDF are", len(data), data[:min(len(data), 8)])
	case err != nil:
		return Info{}, errors.New(strings.TrimPrefix(err.Error(), "media: "))
	case declared != "" && info.MediaType != declared:
		return Info{}, fmt.Errorf("declared %s but the bytes are %s", declared, info.MediaType)
	}
	return info, fits(kind, info.MediaType)
}

// fits reports, with an error naming both, whether media of type typ may
// be a part of kind.
func fits(kind llm.PartKind, typ string) error {
	ok := false
	switch kind {
	case llm.PartImage:
		ok = strings.HasPrefix(typ, "image/")
	case llm.PartAudio:
		ok = strings.HasPrefix(typ, "audio/")
	case llm.PartFile:
		ok = typ == TypePDF
	}
	if ok {
		return nil
	}
	want := map[llm.PartKind]string{llm.PartImage: "an image", llm.PartAudio: "audio", llm.PartFile: "a document (PDF)"}[kind]
	return fmt.Errorf("is %s, but the %s field takes %s", typ, kind, want)
}

// extTypes maps file extensions to the types [Sniff] knows.
var extTypes = map[string]string{
	".png": TypePNG, ".jpg": TypeJPEG, ".jpeg": TypeJPEG, ".jpe": TypeJPEG, ".gif": TypeGIF,
	".webp": TypeWebP, ".pdf": TypePDF, ".wav": TypeWAV, ".mp3": TypeMP3,
}

// extType returns the type name's extension declares, or "" for an
// extension of no known type.
func extType(name string) string {
	return extTypes[strings.ToLower(path.Ext(filepath.ToSlash(name)))]
}

// loadDataURL reads a data: URL.
func (l *Loader) loadDataURL(kind llm.PartKind, ref string) (llm.Part, error) {
	typ, data, err := DecodeDataURL(ref, l.maxBytes)
	if err != nil {
		return llm.Part{}, dataURLLoadError(err)
	}
	info, err := sniffAs(kind, Canonical(typ), data)
	if err != nil {
		return llm.Part{}, &LoadError{Err: fmt.Errorf("data: URL: %w", err)}
	}
	return llm.Part{Kind: kind, URL: ref, MediaType: info.MediaType, Width: info.Width, Height: info.Height, Pages: info.Pages}, nil
}

// dataURLLoadError turns an error of DecodeDataURL into a *LoadError that
// names the data: URL, not its payload.
func dataURLLoadError(err error) error {
	if errors.Is(err, ErrDataURLEncoded) {
		return &LoadError{Err: errors.New("data: URL is not base64 (want data:TYPE;base64,…)")}
	}
	msg := strings.TrimPrefix(err.Error(), "media: ")
	if !strings.HasPrefix(msg, "data: URL") {
		msg = "data: URL: " + msg
	}
	return &LoadError{Err: errors.New(msg)}
}

// errEscapes is the reason for a path outside the roots.
var errEscapes = errors.New("escapes the media roots")

// readPath opens the file path ref names under the first root holding
// it, refuses anything but a regular file of at most maxBytes (before
// reading it), and hands read a reader capped at maxBytes+1 bytes.
func (l *Loader) readPath(ctx context.Context, ref string, read func(r io.Reader, size int64) ([]byte, error)) ([]byte, error) {
	if ref == "" {
		return nil, errors.New("empty media reference")
	}
	if len(l.roots) == 0 {
		return nil, errors.New("a path, but the job has no media roots (media.roots)")
	}
	if strings.IndexByte(ref, 0) >= 0 {
		return nil, errors.New("the path holds a NUL byte")
	}
	candidates := l.roots
	rel := filepath.Clean(ref)
	if filepath.IsAbs(ref) {
		candidates = nil
		for _, r := range l.roots {
			if p, err := filepath.Rel(r.dir, rel); err == nil && filepath.IsLocal(p) {
				candidates = []root{r}
				rel = p
				break
			}
		}
		if candidates == nil {
			return nil, errEscapes
		}
	} else if !filepath.IsLocal(ref) {
		return nil, errEscapes
	}
	var in *os.Root
	for _, r := range candidates {
		// Stat before opening: opening a named pipe would block.
		st, err := r.r.Stat(rel)
		if err == nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("not a regular file (%s)", fileKind(st.Mode()))
		}
		if err == nil {
			in = r.r
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, openError(err)
		}
	}
	if in == nil {
		return nil, fmt.Errorf("no such file under the media roots (%s)", l.rootList())
	}
	f, err := in.Open(rel)
	if err != nil {
		return nil, openError(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, openError(err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fileKind(st.Mode()))
	}
	if st.Size() > l.maxBytes {
		return nil, l.overCap(st.Size())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cr := &countingReader{r: io.LimitReader(f, l.maxBytes+1)}
	data, err := read(cr, st.Size())
	if err != nil {
		return nil, err
	}
	if cr.n > l.maxBytes {
		return nil, fmt.Errorf("grew past the %s cap (media.max_bytes) while being read", sizeName(l.maxBytes))
	}
	return data, nil
}

// readAll reads r, sized for a file of size bytes (and one more, to see
// it grew) so that the bytes are read in one allocation.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, size+1)
	n, err := io.ReadFull(r, b)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return b[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r) // it grew; r's cap still bounds it
	return append(b, rest...), err
}

// openError says why opening a file under a root failed, without the
// root's own path.
func openError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if strings.Contains(pe.Err.Error(), "escapes") {
			return errEscapes
		}
		return pe.Err
	}
	return err
}

// fileKind names what a non-regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// rootList names the roots for messages.
func (l *Loader) rootList() string {
	dirs := make([]string, len(l.roots))
	for i, r := range l.roots {
		dirs[i] = r.dir
	}
	return strings.Join(dirs, ", ")
}

// overCap is the error for n bytes over the cap.
func (l *Loader) overCap(n int64) error {
	return fmt.Errorf("%d bytes, over the %s cap (media.max_bytes)", n, sizeName(l.maxBytes))
}

// sizeName writes n bytes as "20 MiB", "512 KiB" or "1000 bytes".
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1e9 && n%1e9 == 0: // as media.max_bytes writes them: 1GB, 20MB, 512KB
		return fmt.Sprintf("%d GB", n/1e9)
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%d MB", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%d KB", n/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
