package jobrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/batchagent/batchagent/input"
	"github.com/batchagent/batchagent/job"
)

// CheckPlaceholders reports, before any agent runs, the placeholders of the
// task template whose fields the inputs at inPath lack: the names of a CSV
// file's header, or the keys of the first object of a JSONL file. Without
// it, a misspelt placeholder fails every input with the same template
// error (or, for a .json array, the first element). It reopens the file and reads only as far as it needs. An input
// file it cannot read or decode passes: the run reports that as it reads.
func CheckPlaceholders(jobPath, task, inPath string) error {
	tmpl, err := job.ParseTemplate(task)
	if err != nil || len(tmpl.Fields()) == 0 {
		return nil // the job file's check reports a bad template
	}
	f, err := os.Open(inPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	name := filepath.Base(inPath)
	var have []string
	var where string
	switch strings.ToLower(filepath.Ext(inPath)) {
	case ".csv":
		if have, err = input.CSVHeader(f, name); err != nil {
			return nil
		}
		where = "the header of " + name
	case ".json":
		if have, err = input.JSONArrayFields(f, name); err != nil {
			return nil // no element decodes: each fails on its own
		}
		where = "the first element of " + name
	default:
		if have, err = input.JSONLFields(f, name); err != nil {
			return nil // no object decodes: each line fails on its own
		}
		where = "the first object of " + name
	}
	missing := tmpl.MissingFields(have)
	if len(missing) == 0 {
		return nil
	}
	ph := make([]string, len(missing))
	for i, m := range missing {
		ph[i] = "{" + m + "}"
	}
	noun := "placeholder " + ph[0] + " has no field"
	if len(ph) > 1 {
		noun = "placeholders " + strings.Join(ph, ", ") + " have no fields"
	}
	fields := "no fields"
	if len(have) > 0 {
		const shown = 20 // names listed at most
		q := make([]string, 0, min(len(have), shown)+1)
		for _, h := range have[:min(len(have), shown)] {
			q = append(q, strconv.Quote(h))
		}
		if len(have) > shown {
			q = append(q, fmt.Sprintf("and %d more", len(have)-shown))
		}
		fields = "fields " + strings.Join(q, ", ")
	}
	return fmt.Errorf("%s: task: %s in %s, which has %s", jobPath, noun, where, fields)
}
