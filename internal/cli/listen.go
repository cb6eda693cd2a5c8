package cli

import (
	"strconv"
	"time"
)

// shutdownGrace is how long `run --openai-batch` lets its in-process
// gateway's requests finish before it stops them.
const shutdownGrace = 5 * time.Second

// validPort reports whether p, the port of an --addr, is a port number
// (0: any free port).
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}
