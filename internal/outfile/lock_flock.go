//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package outfile

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive flock(2) lock on f without waiting; a lock held
// elsewhere is errLocked.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		}
		return err
	}
}
