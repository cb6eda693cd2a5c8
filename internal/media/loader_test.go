package media_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchagent/batchagent/internal/media"
	"github.com/batchagent/batchagent/llm"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mediaDir is a test tree: root/ with media files, a second root root2/,
// and outside/ holding secret.png, which no load may return.
type mediaDir struct {
	root, root2, outside string
	cat, photo, pdf, wav []byte
	secret               []byte
}

func newMediaDir(t testing.TB) *mediaDir {
	t.Helper()
	base := t.TempDir()
	d := &mediaDir{
		root: filepath.Join(base, "root"), root2: filepath.Join(base, "root2"), outside: filepath.Join(base, "outside"),
		cat: pngBytes(t, 40, 30), photo: jpegBytes(t, 16, 8), pdf: pdfBytes(2), wav: wavBytes(time.Second),
		secret: pngBytes(t, 7, 9),
	}
	write := func(path string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(d.root, "cat.png"), d.cat)
	write(filepath.Join(d.root, "photo.jpg"), d.photo)
	write(filepath.Join(d.root, "liar.png"), d.photo)
	write(filepath.Join(d.root, "doc.pdf"), d.pdf)
	write(filepath.Join(d.root, "rec.wav"), d.wav)
	write(filepath.Join(d.root, "notes.txt"), []byte("just text"))
	write(filepath.Join(d.root, "sub", "deep.png"), d.cat)
	write(filepath.Join(d.root2, "only2.png"), d.cat)
	write(filepath.Join(d.outside, "secret.png"), d.secret)
	for link, target := range map[string]string{
		"link-in.png":  "cat.png",
		"link-out.png": filepath.Join("..", "outside", "secret.png"),
		"link-abs.png": filepath.Join(d.outside, "secret.png"),
		"sub/up.png":   filepath.Join("..", "cat.png"),
		"outdir":       d.outside,
	} {
		if err := os.Symlink(target, filepath.Join(d.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	big, err := os.Create(filepath.Join(d.root, "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Write(d.cat); err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(2 << 30); err != nil { // sparse: 2 GiB that take no disk
		t.Fatal(err)
	}
	big.Close()
	if err := syscall.Mkfifo(filepath.Join(d.root, "pipe.png"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func newLoader(t testing.TB, cfg media.LoaderConfig) *media.Loader {
	t.Helper()
	l, err := media.NewLoader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// wantLoadError asserts err is a *media.LoadError with Ref ref whose text
// holds every one of want, and that part holds nothing.
func wantLoadError(t *testing.T, p llm.Part, err error, ref string, want ...string) {
	t.Helper()
	var le *media.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want a *media.LoadError", err, err)
	}
	if le.Ref != ref {
		t.Errorf("LoadError.Ref = %q, want %q", le.Ref, ref)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if p.Data != nil || p.URL != "" {
		t.Errorf("failed load returned a part with %d bytes, URL %.40q", len(p.Data), p.URL)
	}
}

func TestLoaderPaths(t *testing.T) {
	t.Parallel()
	d := newMediaDir(t)
	l := newLoader(t, media.LoaderConfig{Roots: []string{d.root, d.root2}})
	ctx := context.Background()
	ok := []struct {
		ref       string
		kind      llm.PartKind
		data      []byte
		typ, name string
		w, h, pgs int
	}{
		{"cat.png", llm.PartImage, d.cat, media.TypePNG, "cat.png", 40, 30, 0},
		{filepath.Join(d.root, "cat.png"), llm.PartImage, d.cat, media.TypePNG, "cat.png", 40, 30, 0},
		{"./sub/../cat.png", llm.PartImage, d.cat, media.TypePNG, "cat.png", 40, 30, 0},
		{"sub/deep.png", llm.PartImage, d.cat, media.TypePNG, "deep.png", 40, 30, 0},
		{"link-in.png", llm.PartImage, d.cat, media.TypePNG, "link-in.png", 40, 30, 0},
		{"sub/up.png", llm.PartImage, d.cat, media.TypePNG, "up.png", 40, 30, 0}, // a symlink up, still inside the root
		{"photo.jpg", llm.PartImage, d.photo, media.TypeJPEG, "photo.jpg", 16, 8, 0},
		{"doc.pdf", llm.PartFile, d.pdf, media.TypePDF, "doc.pdf", 0, 0, 2},
		{"rec.wav", llm.PartAudio, d.wav, media.TypeWAV, "rec.wav", 0, 0, 0},
		{"only2.png", llm.PartImage, d.cat, media.TypePNG, "only2.png", 40, 30, 0}, // the second root
	}
	for _, tt := range ok {
		p, err := l.Load(ctx, tt.kind, tt.ref)
		if err != nil {
			t.Errorf("Load(%s, %q): %v", tt.kind, tt.ref, err)
			continue
		}
		want := llm.Part{Kind: tt.kind, Data: tt.data, MediaType: tt.typ, Filename: tt.name, Width: tt.w, Height: tt.h, Pages: tt.pgs, Ref: tt.ref, Hash: sha(tt.data)}
		if fmt.Sprint(p) != fmt.Sprint(want) {
			t.Errorf("Load(%s, %q) = %+v\nwant %+v", tt.kind, tt.ref, p, want)
		}
	}

	bad := []struct {
		name string
		kind llm.PartKind
		ref  string
		want []string
	}{
		{"dot-dot", llm.PartImage, "../outside/secret.png", []string{"escapes the media roots"}},
		{"dot-dot deep", llm.PartImage, "photos/../../outside/secret.png", []string{"escapes the media roots"}},
		{"absolute outside", llm.PartImage, filepath.Join(d.outside, "secret.png"), []string{"escapes the media roots"}},
		{"absolute with dot-dot", llm.PartImage, d.root + "/../outside/secret.png", []string{"escapes the media roots"}},
		{"symlink out", llm.PartImage, "link-out.png", []string{"escapes the media roots"}},
		{"absolute symlink out", llm.PartImage, "link-abs.png", []string{"escapes the media roots"}},
		{"through a symlinked dir", llm.PartImage, "outdir/secret.png", []string{"escapes the media roots"}},
		{"2 GiB sparse", llm.PartImage, "big.png", []string{"2147483648 bytes, over the 20 MiB cap (media.max_bytes)"}},
		{"directory", llm.PartImage, "sub", []string{"not a regular file (a directory)"}},
		{"named pipe", llm.PartImage, "pipe.png", []string{"not a regular file (a named pipe)"}},
		{"missing", llm.PartImage, "nope.png", []string{"no such file under the media roots", d.root}},
		{"png of jpeg bytes", llm.PartImage, "liar.png", []string{"declared image/png but the bytes are image/jpeg"}},
		{"pdf to an image field", llm.PartImage, "doc.pdf", []string{"is application/pdf, but the image field takes an image"}},
		{"image to a file field", llm.PartFile, "cat.png", []string{"is image/png, but the file field takes a document (PDF)"}},
		{"image to an audio field", llm.PartAudio, "cat.png", []string{"is image/png, but the audio field takes audio"}},
		{"text", llm.PartFile, "notes.txt", []string{"not a known media type"}},
		{"empty", llm.PartImage, "", []string{"empty media reference"}},
		{"NUL", llm.PartImage, "cat.png\x00.txt", []string{"NUL"}},
		{"bad kind", llm.PartText, "cat.png", []string{`part kind "text" is not a media kind`}},
		{"other scheme", llm.PartImage, "file:///etc/passwd", []string{`scheme "file" is not allowed`}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p, err := l.Load(ctx, tt.kind, tt.ref)
			if tt.ref != "" {
				tt.want = append(tt.want, tt.ref+": ")
			}
			wantLoadError(t, p, err, tt.ref, tt.want...)
		})
	}
}

func TestLoaderNoRoots(t *testing.T) {
	t.Parallel()
	l := newLoader(t, media.LoaderConfig{})
	p, err := l.Load(context.Background(), llm.PartImage, "cat.png")
	wantLoadError(t, p, err, "cat.png", "no media roots (media.roots)")
}

func TestNewLoaderErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		cfg  media.LoaderConfig
		want string
	}{
		{media.LoaderConfig{Roots: []string{"photos/"}}, `roots[0] "photos/" is not an absolute path`},
		{media.LoaderConfig{Roots: []string{dir, filepath.Join(dir, "nope")}}, "roots[1]"},
		{media.LoaderConfig{MaxBytes: -1}, "negative max_bytes -1"},
		{media.LoaderConfig{Fetch: []string{"cdn.example.com", "https://x.example.com/"}}, `fetch[1] "https://x.example.com/"`},
	} {
		l, err := media.NewLoader(tt.cfg)
		if err == nil {
			l.Close()
			t.Errorf("NewLoader(%+v) = nil error, want %q", tt.cfg, tt.want)
		} else if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewLoader(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestLoaderMaxBytes(t *testing.T) {
	t.Parallel()
	d := newMediaDir(t)
	l := newLoader(t, media.LoaderConfig{Roots: []string{d.root}, MaxBytes: 100})
	p, err := l.Load(context.Background(), llm.PartImage, "cat.png")
	wantLoadError(t, p, err, "cat.png", fmt.Sprintf("cat.png: %d bytes, over the 100 bytes cap (media.max_bytes)", len(d.cat)))
	p, err = l.Load(context.Background(), llm.PartImage, dataURL("image/png", d.cat))
	wantLoadError(t, p, err, "", "data: URL", "over the limit of 100")
}

func TestLoaderDataURL(t *testing.T) {
	t.Parallel()
	l := newLoader(t, media.LoaderConfig{})
	ctx := context.Background()
	cat := pngBytes(t, 12, 34)
	u := dataURL("image/png", cat)
	p, err := l.Load(ctx, llm.PartImage, u)
	if err != nil {
		t.Fatal(err)
	}
	if want := (llm.Part{Kind: llm.PartImage, URL: u, MediaType: media.TypePNG, Width: 12, Height: 34}); fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("Load(data URL) = %+v, want %+v", p, want)
	}
	p, err = l.Load(ctx, llm.PartFile, dataURL("application/pdf", pdfBytes(3)))
	if err != nil || p.Pages != 3 || p.MediaType != media.TypePDF {
		t.Errorf("Load(PDF data URL) = %+v, %v; want 3 pages", p, err)
	}
	for _, tt := range []struct {
		name, ref string
		kind      llm.PartKind
		want      []string
	}{
		{"not base64", "data:image/png,hello%20world", llm.PartImage, []string{"data: URL is not base64"}},
		{"bad base64", "data:image/png;base64,!!!!", llm.PartImage, []string{"data: URL", "not valid base64"}},
		{"declared type lies", dataURL("image/png", jpegBytes(t, 4, 4)), llm.PartImage, []string{"data: URL: declared image/png but the bytes are image/jpeg"}},
		{"pdf to an image field", dataURL("application/pdf", pdfBytes(1)), llm.PartImage, []string{"data: URL: is application/pdf, but the image field takes an image"}},
		{"no type", "data:;base64,AAAA", llm.PartImage, []string{"data: URL", "no media type"}},
		{"html as png", dataURL("image/png", []byte("<html>hi</html>")), llm.PartImage, []string{"data: URL: declared image/png but the bytes are not of a known type"}},
		{"text", dataURL("text/plain", []byte("hello")), llm.PartImage, []string{"data: URL: declared text/plain but the bytes are not of a known type"}},
		{"jpg alias", dataURL("image/jpg", pngBytes(t, 2, 2)), llm.PartImage, []string{"data: URL: declared image/jpeg but the bytes are image/png"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := l.Load(ctx, tt.kind, tt.ref)
			wantLoadError(t, p, err, "", tt.want...)
			if len(tt.ref) > 30 && strings.Contains(err.Error(), tt.ref[25:]) {
				t.Errorf("error %q repeats the payload", err)
			}
		})
	}
}

// mediaServer serves /cat.png, /liar.png (JPEG bytes as image/png),
// /big (5000 bytes with a Content-Length), /chunked (5000 bytes without
// one), /to?u=URL (a redirect to URL) and /missing (404).
func mediaHandler(t testing.TB, cat []byte) http.Handler {
	photo := jpegBytes(t, 4, 4)
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(cat)
	})
	mux.HandleFunc("/liar.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(photo)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5000")
		w.Write(append(cat, make([]byte, 5000-len(cat))...))
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Write(cat)
		w.(http.Flusher).Flush()
		w.Write(make([]byte, 5000))
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	return mux
}

func TestLoaderURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := pngBytes(t, 40, 30)
	srv := httptest.NewServer(mediaHandler(t, cat))
	t.Cleanup(srv.Close)
	tls := httptest.NewTLSServer(mediaHandler(t, cat))
	t.Cleanup(tls.Close)
	_, tlsPort, _ := net.SplitHostPort(tls.Listener.Addr().String())

	// A client that reaches the TLS server whatever host a URL names, as
	// a CDN's DNS name would: its dialer is not guarded, so the loader's
	// own checks (scheme, host, literal addresses, redirects) are what is
	// tested.
	tr := tls.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, tls.Listener.Addr().String())
	}
	cdn := newLoader(t, media.LoaderConfig{Fetch: []string{"cdn.example.com"}, MaxBytes: 1000, Client: &http.Client{Transport: tr}})

	p, err := cdn.Load(ctx, llm.PartImage, "https://cdn.example.com/cat.png")
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Part{Kind: llm.PartImage, Data: cat, MediaType: media.TypePNG, Filename: "cat.png", Width: 40, Height: 30, Ref: "https://cdn.example.com/cat.png", Hash: sha(cat)}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("Load(https URL) = %+v, want %+v", p, want)
	}
	if h, err := cdn.Hash(ctx, "https://cdn.example.com/cat.png"); err != nil || h != sha(cat) {
		t.Errorf("Hash(https URL) = %q, %v; want %q", h, err, sha(cat))
	}

	guarded := newLoader(t, media.LoaderConfig{Fetch: []string{"localhost", "cdn.example.com", "10.0.0.1"}})
	private := newLoader(t, media.LoaderConfig{Fetch: []string{"127.0.0.1"}, AllowPrivate: true})

	for _, tt := range []struct {
		name string
		l    *media.Loader
		ref  string
		want []string
	}{
		{"loopback literal", guarded, "https://127.0.0.1/x.png", []string{"refused: 127.0.0.1 is a loopback address"}},
		{"live loopback server", guarded, srv.URL + "/cat.png", []string{"refused: 127.0.0.1 is a loopback address"}},
		{"loopback literal over http", guarded, "http://127.0.0.1/x.png", []string{"refused: 127.0.0.1 is a loopback address"}},
		{"private literal", guarded, "https://10.0.0.1/x.png", []string{"refused: 10.0.0.1 is a private address"}},
		{"metadata address", guarded, "https://169.254.169.254/latest", []string{"refused: 169.254.169.254 is a link-local address"}},
		{"mapped loopback", guarded, "https://[::ffff:127.0.0.1]/x.png", []string{"refused: 127.0.0.1 is a loopback address"}},
		{"name resolving to loopback", guarded, "https://localhost:" + tlsPort + "/cat.png", []string{`refused: host "localhost" resolves to`, "a loopback address"}},
		{"host not in fetch", guarded, "https://evil.example.org/x.png", []string{`host "evil.example.org" is not allowed; allowed hosts: localhost, cdn.example.com, 10.0.0.1 (media.fetch)`}},
		{"http", guarded, "http://cdn.example.com/x.png", []string{`scheme "http" is refused; media URLs must be https`}},
		{"user info", guarded, "https://u:p@cdn.example.com/x.png", []string{"user information"}},
		{"redirect to private", cdn, "https://cdn.example.com/to?u=https://10.0.0.1/x.png", []string{"redirected to https://10.0.0.1/x.png: refused: 10.0.0.1 is a private address"}},
		{"redirect to loopback name", cdn, "https://cdn.example.com/to?u=https://localhost/x.png", []string{`redirected to https://localhost/x.png: host "localhost" is not allowed`}},
		{"redirect to http", cdn, "https://cdn.example.com/to?u=http://cdn.example.com/cat.png", []string{`redirected to http://cdn.example.com/cat.png: scheme "http" is refused`}},
		{"oversized with length", cdn, "https://cdn.example.com/big", []string{"5000 bytes, over the 1 KB cap (media.max_bytes)"}},
		{"oversized without length", cdn, "https://cdn.example.com/chunked", []string{"body over the 1 KB cap (media.max_bytes)"}},
		{"content type lies", cdn, "https://cdn.example.com/liar.png", []string{"declared image/png but the bytes are image/jpeg"}},
		{"not found", cdn, "https://cdn.example.com/missing", []string{"HTTP 404 Not Found"}},
		{"no fetch hosts", newLoader(t, media.LoaderConfig{}), "https://cdn.example.com/x.png", []string{"not allowed: no host is (media.fetch is empty)"}},
		{"private mode, other host", private, srv.URL + "/to?u=http://10.0.0.1:1/x.png", []string{`redirected to http://10.0.0.1:1/x.png: host "10.0.0.1:1" is not allowed`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.l.Load(ctx, llm.PartImage, tt.ref)
			wantLoadError(t, p, err, tt.ref, append([]string{tt.ref + ": "}, tt.want...)...)
		})
	}

	// Test mode: loopback and http allowed for hosts in Fetch.
	p, err = private.Load(ctx, llm.PartImage, srv.URL+"/cat.png")
	if err != nil || p.Hash != sha(cat) || p.Ref != srv.URL+"/cat.png" || p.Width != 40 {
		t.Errorf("Load(%s/cat.png) with AllowPrivate = %+v, %v", srv.URL, p, err)
	}
}

func TestLoaderPassURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	anyHost := newLoader(t, media.LoaderConfig{PassURLs: true})
	p, err := anyHost.Load(ctx, llm.PartImage, "https://img.example.net/a.png")
	if want := (llm.Part{Kind: llm.PartImage, URL: "https://img.example.net/a.png", Ref: "https://img.example.net/a.png"}); err != nil || fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("Load(passed URL) = %+v, %v; want %+v", p, err, want)
	}
	if _, err := anyHost.Hash(ctx, "https://img.example.net/a.png"); err == nil || !strings.Contains(err.Error(), "media.fetch names no host") {
		t.Errorf("Hash(passed URL, no fetch hosts) = %v, want a refusal", err)
	}
	for _, tt := range []struct {
		l    *media.Loader
		ref  string
		want string
	}{
		{anyHost, "https://127.0.0.1/a.png", "refused: 127.0.0.1 is a loopback address"},
		{anyHost, "http://img.example.net/a.png", `scheme "http" is refused`},
		{anyHost, "https://img.example.net/a.pdf", "by its extension is application/pdf, but the image field takes an image"},
		{newLoader(t, media.LoaderConfig{PassURLs: true, Fetch: []string{"*.example.com"}}), "https://img.example.net/a.png", `host "img.example.net" is not allowed`},
	} {
		p, err := tt.l.Load(ctx, llm.PartImage, tt.ref)
		wantLoadError(t, p, err, tt.ref, tt.want)
	}
}

func TestLoaderHash(t *testing.T) {
	t.Parallel()
	d := newMediaDir(t)
	l := newLoader(t, media.LoaderConfig{Roots: []string{d.root}})
	ctx := context.Background()
	h, err := l.Hash(ctx, "cat.png")
	if err != nil || h != sha(d.cat) {
		t.Fatalf("Hash(cat.png) = %q, %v; want %q", h, err, sha(d.cat))
	}
	if err := os.WriteFile(filepath.Join(d.root, "cat.png"), d.photo, 0o644); err != nil {
		t.Fatal(err)
	}
	if h, err := l.Hash(ctx, "cat.png"); err != nil || h != sha(d.photo) {
		t.Errorf("Hash(cat.png) after a change = %q, %v; want %q", h, err, sha(d.photo))
	}
	if h, err := l.Hash(ctx, dataURL("image/png", d.cat)); err != nil || h != sha(d.cat) {
		t.Errorf("Hash(data URL) = %q, %v; want %q", h, err, sha(d.cat))
	}
	for ref, want := range map[string]string{
		"big.png":      "big.png: 2147483648 bytes, over the 20 MiB cap",
		"link-out.png": "link-out.png: escapes the media roots",
		"../x.png":     "../x.png: escapes the media roots",
		"sub":          "sub: not a regular file",
	} {
		if _, err := l.Hash(ctx, ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Hash(%q) = %v, want %q", ref, err, want)
		}
	}
}

func TestLoaderCanceled(t *testing.T) {
	t.Parallel()
	d := newMediaDir(t)
	l := newLoader(t, media.LoaderConfig{Roots: []string{d.root}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Load(ctx, llm.PartImage, "cat.png"); !errors.Is(err, context.Canceled) {
		t.Errorf("Load(canceled) = %v, want context.Canceled", err)
	}
}

func TestLoaderConcurrent(t *testing.T) {
	t.Parallel()
	d := newMediaDir(t)
	srv := httptest.NewServer(mediaHandler(t, d.cat))
	t.Cleanup(srv.Close)
	l := newLoader(t, media.LoaderConfig{Roots: []string{d.root, d.root2}, Fetch: []string{"127.0.0.1"}, AllowPrivate: true})
	refs := map[string]string{"cat.png": sha(d.cat), "photo.jpg": sha(d.photo), "only2.png": sha(d.cat), srv.URL + "/cat.png": sha(d.cat)}
	var wg sync.WaitGroup
	errs := make(chan error, 16*len(refs))
	for range 16 {
		wg.Go(func() {
			for ref, want := range refs {
				p, err := l.Load(context.Background(), llm.PartImage, ref)
				if err != nil {
					errs <- err
				} else if p.Hash != want || sha(p.Data) != want {
					errs <- fmt.Errorf("Load(%q) hash %s, want %s", ref, p.Hash, want)
				}
				if _, err := l.Load(context.Background(), llm.PartImage, "link-out.png"); err == nil {
					errs <- errors.New("link-out.png loaded")
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func FuzzLoaderRef(f *testing.F) {
	d := newMediaDir(f)
	l := newLoader(f, media.LoaderConfig{Roots: []string{d.root}, MaxBytes: 1 << 20})
	secret := sha(d.secret)
	for _, s := range []string{
		"cat.png", "./cat.png", "sub/deep.png", "../outside/secret.png", "sub/../../outside/secret.png",
		"link-out.png", "link-abs.png", "outdir/secret.png", "outdir/../cat.png", filepath.Join(d.outside, "secret.png"),
		d.root + "/../outside/secret.png", d.root + "/cat.png", "big.png", "sub", "/", "//", ".", "..", "",
		"cat.png\x00", "data:image/png;base64,AAAA", "data:,x", "https://127.0.0.1/x", "http://[::1]/",
		"file:///etc/passwd", "C:\\cat.png", "sub\\..\\..\\outside\\secret.png", "%2e%2e/outside/secret.png",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if strings.Contains(ref, "pipe") {
			t.Skip() // refused, but by a stat the fuzzer need not repeat
		}
		for _, kind := range []llm.PartKind{llm.PartImage, llm.PartFile} {
			p, err := l.Load(context.Background(), kind, ref)
			if err != nil {
				var le *media.LoadError
				if !errors.As(err, &le) {
					t.Fatalf("Load(%q) error %v is a %T, want *media.LoadError", ref, err, err)
				}
				continue
			}
			if p.Hash == secret || sha(p.Data) == secret {
				t.Fatalf("Load(%q) read outside the root: %+v", ref, p)
			}
		}
		if h, err := l.Hash(context.Background(), ref); err == nil && h == secret {
			t.Fatalf("Hash(%q) read outside the root", ref)
		}
	})
}

// BenchmarkLoaderPath loads a small PNG from a root: the per-input cost of
// a job's image field (open through os.Root, stat, read, sniff, hash).
func BenchmarkLoaderPath(b *testing.B) {
	d := newMediaDir(b)
	l := newLoader(b, media.LoaderConfig{Roots: []string{d.root}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Load(context.Background(), llm.PartImage, "cat.png"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoaderHash hashes the same file, streamed.
func BenchmarkLoaderHash(b *testing.B) {
	d := newMediaDir(b)
	l := newLoader(b, media.LoaderConfig{Roots: []string{d.root}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Hash(context.Background(), "cat.png"); err != nil {
			b.Fatal(err)
		}
	}
}
