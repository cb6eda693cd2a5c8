//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package outfile

import "os"

// flock is a no-op where flock(2) is missing: runs there are not guarded
// against sharing a file.
func flock(*os.File) error { return nil }
