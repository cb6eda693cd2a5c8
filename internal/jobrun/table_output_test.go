package jobrun_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/batchagent/batchagent"
	"github.com/batchagent/batchagent/internal/jobrun"
	"github.com/batchagent/batchagent/internal/outfile"
	"github.com/google/go-cmp/cmp"
)

// tableJob writes a job over n inputs whose sim answers fail validation
// about a third of the time, with an output schema of every column type.
func tableJob(t *testing.T, n int, latency string) (dir, job, in string) {
	t.Helper()
	dir = t.TempDir()
	job = filepath.Join(dir, "job.yaml")
	yaml := `backend: "sim://?seed=3&tool_turns=0&invalid=0.3&latency=` + latency + `"
task: "Item {id}"
limits: {max_retries: 0, max_inflight: 4}
pricing: {input: 2.5, output: 10}
output_schema:
  type: object
  properties:
    value: {type: integer}
    label: {type: string}
    ok: {type: boolean}
    score: {type: number}
    tags: {type: array, items: {type: string}}
    index: {type: integer}
  required: [value, label, ok, score, tags, index]
`
	if err := os.WriteFile(job, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	in = filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, job, in
}

// runTo runs job over in to out; onResult, if set, sees each result.
func runTo(t *testing.T, ctx context.Context, job, in, out string, onResult batchagent.OnResultFunc) jobrun.Status {
	t.Helper()
	r, err := jobrun.Open(ctx, job, jobrun.Options{Inputs: in, Out: out, OnResult: onResult}, io.Discard)
	if err != nil {
		t.Fatalf("Open(%s) = %v", out, err)
	}
	return r.Run(ctx, true, io.Discard)
}

// tableColumns are the columns compared: the output's, index and error kind.
var tableColumns = []string{"index", "value", "label", "ok", "score", "tags", "output.index", "error_kind"}

// jsonlRows reads the rows of a JSONL results file as the table columns'
// text, by index.
func jsonlRows(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Index  int                        `json:"index"`
			Output map[string]json.RawMessage `json:"output"`
			Error  *struct{ Kind string }     `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		row := map[string]string{"index": strconv.Itoa(l.Index)}
		for _, c := range tableColumns[1:7] {
			p := strings.TrimPrefix(c, "output.")
			v, ok := l.Output[p]
			if !ok {
				row[c] = ""
				continue
			}
			var s string
			if json.Unmarshal(v, &s) != nil {
				s = string(v)
			}
			row[c] = s
		}
		row["error_kind"] = ""
		if l.Error != nil {
			row["error_kind"] = l.Error.Kind
		}
		rows[row["index"]] = row
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// csvRows reads a CSV table's rows by index, checking its header.
func csvRows(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want := []string{"index", "value", "label", "ok", "score", "tags", "output.index", "error_kind", "error_message", "turns", "prompt_tokens", "completion_tokens", "cost"}
	if diff := cmp.Diff(want, recs[0]); diff != "" {
		t.Fatalf("%s header (-want +got):\n%s", path, diff)
	}
	rows := map[string]map[string]string{}
	prev := -1
	for n, rec := range recs[1:] {
		if i, err := strconv.Atoi(rec[0]); err != nil || i <= prev {
			t.Errorf("%s: row %d has index %s after %d: rows are not in input order", path, n, rec[0], prev)
		} else {
			prev = i
		}
		if rec[12] == "" {
			t.Errorf("%s: row %d has no cost", path, n)
		}
		row := map[string]string{}
		for i, c := range tableColumns {
			row[c] = rec[i]
		}
		if _, dup := rows[rec[0]]; dup {
			t.Errorf("%s: index %s twice", path, rec[0])
		}
		rows[rec[0]] = row
	}
	return rows
}

// parquetRows reads a Parquet table's rows by index with Apache Arrow's
// reader, not the library that wrote it.
func parquetRows(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer tbl.Release()
	n := int(tbl.NumRows())
	rows := make([]map[string]string, n)
	for i := range rows {
		rows[i] = map[string]string{}
	}
	for ci := range int(tbl.NumCols()) {
		col := tbl.Column(ci)
		name := col.Name()
		if ci == 0 && name != "index" {
			t.Errorf("%s: first column %q, want index", path, name)
		}
		r := 0
		for _, ch := range col.Data().Chunks() {
			for j := range ch.Len() {
				if !ch.IsNull(j) {
					rows[r][name] = ch.ValueStr(j)
				} else {
					rows[r][name] = ""
				}
				r++
			}
		}
	}
	byIndex := map[string]map[string]string{}
	prev := -1
	for n, row := range rows {
		if i, err := strconv.Atoi(row["index"]); err != nil || i <= prev {
			t.Errorf("%s: row %d has index %s after %d: rows are not in input order", path, n, row["index"], prev)
		} else {
			prev = i
		}
		if row["cost"] == "" {
			t.Errorf("%s: row %d has no cost", path, n)
		}
		kept := map[string]string{}
		for _, c := range tableColumns {
			kept[c] = row[c]
		}
		byIndex[row["index"]] = kept
	}
	return byIndex
}

// TestParquetReadBack runs one job to JSONL and to Parquet and reads the
// Parquet file back with Apache Arrow's reader: the same rows, typed
// columns, failures with their kinds, in input order.
func TestParquetReadBack(t *testing.T) {
	dir, job, in := tableJob(t, 60, "0s")
	if st := runTo(t, t.Context(), job, in, filepath.Join(dir, "r.jsonl"), nil); st != jobrun.Failed {
		t.Fatalf("JSONL run: status %d, want %d (some inputs fail)", st, jobrun.Failed)
	}
	want := jsonlRows(t, filepath.Join(dir, "r.jsonl"))
	out := filepath.Join(dir, "r.parquet")
	runTo(t, t.Context(), job, in, out, nil)
	got := parquetRows(t, out)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parquet rows differ from the JSONL's (-jsonl +parquet):\n%s", diff)
	}
	failed := 0
	for _, r := range got {
		if r["error_kind"] != "" {
			failed++
		}
	}
	if failed == 0 || failed == len(got) || len(got) != 60 {
		t.Errorf("%d rows, %d failed: want 60, some failed and some not", len(got), failed)
	}
	if _, err := os.Stat(outfile.JournalPath(out)); !os.IsNotExist(err) {
		t.Errorf("journal of a complete run still there: %v", err)
	}
}

// TestTableResume interrupts a run to CSV and to Parquet, tears the
// journal's last line and removes the table as a kill mid-write would,
// resumes, and finds every input once, as a fresh JSONL run has it.
func TestTableResume(t *testing.T) {
	for _, ext := range []string{"csv", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			const n = 40
			dir, job, in := tableJob(t, n, "2ms")
			runTo(t, t.Context(), job, in, filepath.Join(dir, "r.jsonl"), nil)
			want := jsonlRows(t, filepath.Join(dir, "r.jsonl"))
			read := csvRows
			if ext == "parquet" {
				read = parquetRows
			}

			out := filepath.Join(dir, "r."+ext)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var seen atomic.Int64
			st := runTo(t, ctx, job, in, out, func(batchagent.Result) {
				if seen.Add(1) == 10 {
					cancel()
				}
			})
			if st != jobrun.Interrupted {
				t.Fatalf("interrupted run: status %d, want %d", st, jobrun.Interrupted)
			}
			partial := read(t, out)
			if len(partial) == 0 || len(partial) >= n {
				t.Fatalf("interrupted run wrote %d rows, want some of %d", len(partial), n)
			}
			for i, row := range partial {
				if diff := cmp.Diff(want[i], row); diff != "" {
					t.Errorf("interrupted run's row %s (-want +got):\n%s", i, diff)
				}
			}
			// A kill mid-write: a torn journal line, a table never written.
			journal := outfile.JournalPath(out)
			jf, err := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatalf("journal of an interrupted run: %v", err)
			}
			if _, err := jf.WriteString(`{"index":39,"output":{"val`); err != nil {
				t.Fatal(err)
			}
			jf.Close()
			if err := os.Remove(out); err != nil {
				t.Fatal(err)
			}

			if st := runTo(t, t.Context(), job, in, out, nil); st != jobrun.Failed {
				t.Fatalf("resumed run: status %d, want %d (some inputs fail)", st, jobrun.Failed)
			}
			if diff := cmp.Diff(want, read(t, out)); diff != "" {
				t.Errorf("resumed %s rows differ from a fresh JSONL run's (-jsonl +%s):\n%s", ext, ext, diff)
			}
			if _, err := os.Stat(journal); !os.IsNotExist(err) {
				t.Errorf("journal of a complete run still there: %v", err)
			}
		})
	}
}
