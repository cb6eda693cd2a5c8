package outfile_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The writer flushes from timers: no goroutine may outlive a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
