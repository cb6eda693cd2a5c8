package sqltool

import (
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a connection of [OpenSQLite] waits for a
// lock held by another connection before failing with SQLITE_BUSY.
const busyTimeoutMillis = 5000

// OpenSQLite opens the SQLite database file at path through the pure-Go
// driver modernc.org/sqlite (driver name "sqlite"). With readOnly set it
// opens the file with mode=ro, so SQLite refuses every write, and with
// PRAGMA query_only=ON on every connection; a missing file is then an error
// rather than created. Connections wait up to 5s for locks held by other
// writers. OpenSQLite pings the database, so a file that cannot be opened
// fails here. The caller closes the returned DB, which is safe for
// concurrent use.
func OpenSQLite(path string, readOnly bool) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("sqltool: open SQLite: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqltool: open SQLite %s: %w", path, err)
	}
	dsn := sqliteDSN(abs, readOnly)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqltool: open SQLite %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqltool: open SQLite %s: %w", path, err)
	}
	return db, nil
}

// sqliteDSN returns the file: URI for the absolute path abs. SQLite reads
// mode; the driver reads the underscore keys.
func sqliteDSN(abs string, readOnly bool) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:///C:/x.db
	}
	q := url.Values{"_busy_timeout": {fmt.Sprint(busyTimeoutMillis)}}
	if readOnly {
		q.Set("mode", "ro")
		q.Set("_query_only", "1")
	}
	// An empty authority, then the path with '?', '#' and '%' escaped:
	// SQLite decodes %HH in URI paths.
	return "file://" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}
