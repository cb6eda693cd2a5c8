package outfile

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// OpenRun opens the output of a run over Redis (`batchagent run --redis`),
// whose lines are written in completion order. A new run (resume false)
// truncates it. A resumed one keeps its complete lines, drops a partial
// last line (the write a killed coordinator left half done) and
// everything after it, and the lines of the indexes in drop (failed
// results run again; its values are not read), and calls kept with the
// index of each line kept. The file returned is positioned at its end.
func OpenRun(path string, resume bool, drop map[int]string, kept func(index int)) (*os.File, error) {
	if !resume {
		return os.Create(path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// Lines are dropped from the middle by writing the kept ones to a new
	// file that replaces the output (its lock is a file beside it).
	var rewrite *os.File
	if len(drop) > 0 {
		if rewrite, err = os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".retry-*"); err != nil {
			f.Close()
			return nil, err
		}
		defer os.Remove(rewrite.Name()) // renamed over path unless something failed
		defer rewrite.Close()
	}
	w := bufio.NewWriterSize(rewrite, 64<<10)
	r := bufio.NewReaderSize(f, 64<<10)
	var keep int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF: a line without its newline is partial
		}
		var l struct {
			Index *int `json:"index"`
		}
		if json.Unmarshal(line, &l) != nil || l.Index == nil || *l.Index < 0 {
			break
		}
		if _, ok := drop[*l.Index]; ok {
			continue
		}
		kept(*l.Index)
		keep += int64(len(line))
		if rewrite != nil {
			w.Write(line)
		}
	}
	if rewrite != nil {
		f.Close()
		err := w.Flush()
		if err == nil {
			err = rewrite.Sync()
		}
		if err == nil {
			err = os.Rename(rewrite.Name(), path)
		}
		if err != nil {
			return nil, err
		}
		if f, err = os.OpenFile(path, os.O_RDWR, 0o644); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
