package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix of [Options.Prefix] when none is given.
const DefaultPrefix = "ba:"

// ErrNoRun is returned, wrapped, for a run that is not registered (never
// created, or deleted).
var ErrNoRun = errors.New("queue: no such run")

// Options configures Open. The zero value is valid.
type Options struct {
	// Prefix starts every key the Client reads or writes, so that several
	// deployments can share one Redis. Defaults to [DefaultPrefix] ("ba:").
	Prefix string
	// Logger receives warnings (malformed task entries dropped). Defaults
	// to a logger that discards everything.
	Logger *slog.Logger
}

// Client is a connection to the Redis that holds runs, tasks, results and
// agent states. It is safe for concurrent use; Close it when done.
type Client struct {
	rdb    *redis.Client
	prefix string
	log    *slog.Logger
	// password is the URL's password, scrubbed from every error text.
	password string
	// url is the URL as [RedactURL] writes it.
	url string
}

// Open connects to the Redis at rawURL: redis://[[user]:password@]host:port[/db]
// or rediss://… for TLS (query parameters as go-redis's ParseURL takes them,
// such as skip_verify=true for a self-signed certificate). It pings once and
// returns an error when Redis does not answer or refuses the credentials.
// Errors never contain the password: the URL appears in them as
// [RedactURL] writes it.
func Open(ctx context.Context, rawURL string, opt Options) (*Client, error) {
	ro, pw, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// Blocking reads (Read, Results) and every other call end with ctx.
	ro.ContextTimeoutEnabled = true
	if opt.Prefix == "" {
		opt.Prefix = DefaultPrefix
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{rdb: redis.NewClient(ro), prefix: opt.Prefix, log: opt.Logger, password: pw, url: RedactURL(rawURL)}
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		_ = c.rdb.Close()
		return nil, c.scrub(fmt.Errorf("queue: connect to %s: %w", RedactURL(rawURL), err))
	}
	return c, nil
}

// parseURL parses rawURL into go-redis options and returns its password.
// Its errors name the URL only as RedactURL writes it.
func parseURL(rawURL string) (*redis.Options, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included: tell
		// apart a bad password escape from a bad rest of the URL.
		red := RedactURL(rawURL)
		if _, err2 := url.Parse(red); err2 != nil {
			return nil, "", fmt.Errorf("queue: bad Redis URL %s: %v", red, err2)
		}
		return nil, "", fmt.Errorf("queue: bad Redis URL %s: invalid user or password (escape special characters as %%XX)", red)
	}
	pw, _ := u.User.Password()
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		// The text is scrubbed whole: the password may appear elsewhere in
		// the URL too (in a query value).
		return nil, "", errors.New(scrubText(fmt.Sprintf("queue: bad Redis URL %s: %v", RedactURL(rawURL), err), pw))
	}
	return ro, pw, nil
}

// RedactURL returns rawURL with any password replaced by "xxxxx", for logs
// and errors. A URL that does not parse keeps its scheme and host part,
// with everything before the last "@" of its authority replaced.
func RedactURL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		scheme, rest = "", rawURL
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		// Without an "@" there is no user info, unless a password holds a
		// "/", "?" or "#": look for an "@" anywhere.
		at = strings.LastIndex(rest, "@")
		if at < 0 {
			return rawURL
		}
	}
	out := "xxxxx" + rest[at:]
	if ok {
		out = scheme + "://" + out
	}
	return out
}

// scrubText replaces pw, and its escaped forms, in s.
func scrubText(s, pw string) string {
	if pw == "" {
		return s
	}
	for _, p := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw), url.UserPassword("", pw).String()[1:]} {
		if p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}

// scrubbed is an error whose text has the password replaced; it unwraps
// to the original, for errors.Is and errors.As.
type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub returns err, or a copy of it whose text has the password replaced
// when it holds it.
func (c *Client) scrub(err error) error {
	if err == nil || c.password == "" {
		return err
	}
	msg := err.Error()
	if s := scrubText(msg, c.password); s != msg {
		return &scrubbed{err: err, msg: s}
	}
	return err
}

// fail wraps err, from Redis, as the error of op.
func (c *Client) fail(op string, err error) error {
	return fmt.Errorf("queue: %s: %w", op, c.scrub(err))
}

// Close closes the connections to Redis. Calls made after it fail.
func (c *Client) Close() error {
	if err := c.rdb.Close(); err != nil {
		return c.fail("close", err)
	}
	return nil
}

// Redis returns the underlying go-redis client, for other parts that share
// the connection (shared rate limits, caches). Closing the Client closes it.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Key returns the key made of the Client's prefix and parts joined by ":".
func (c *Client) Key(parts ...string) string {
	return c.prefix + strings.Join(parts, ":")
}

// tag returns id as a Redis hash tag, "{id}": per-run keys then never
// collide, whatever the ID holds, and share a cluster slot.
func tag(id string) string { return "{" + id + "}" }

func (c *Client) runKey(id string) string     { return c.Key("run", tag(id)) }
func (c *Client) resultsKey(id string) string { return c.Key("run", tag(id), "results") }
func (c *Client) outKey(id string) string     { return c.Key("run", tag(id), "out") }
func (c *Client) stateKey(job string) string  { return c.Key("state", tag(job)) }
func (c *Client) workerKey(id string) string  { return c.Key("worker", tag(id)) }
func (c *Client) tasksKey() string            { return c.Key("tasks") }
func (c *Client) runsKey() string             { return c.Key("runs") }
func (c *Client) workersKey() string          { return c.Key("workers") }
