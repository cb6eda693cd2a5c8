package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes the report of d to the file at path, as [Write] does,
// through a temporary file beside it renamed into place, so that a reader
// never sees half a report and a failed write leaves an earlier report
// whole. The file is readable by all (mode 0644).
func WriteFile(path string, d *Data) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = Write(tmp, d)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name()) // best effort: the write failed already
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
