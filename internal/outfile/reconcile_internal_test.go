package outfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchagent/batchagent/agent"
)

// FuzzReconcile reads arbitrary results files against a fixed state:
// reconcile never panics and, when it accepts the file, leaves exactly the
// lines it reports, one per index, each matching a final saved state; in
// ordered mode they are indexes 0..n-1 in order.
func FuzzReconcile(f *testing.F) {
	ok := func(i int) string {
		return `{"index":` + string(rune('0'+i)) + `,"output":{"v":` + string(rune('0'+i)) + `},"model_calls":1}` + "\n"
	}
	f.Add([]byte(ok(0)+ok(1)+ok(2)), false)
	f.Add([]byte(ok(2)+ok(0)+ok(0)+ok(1)), true)
	f.Add([]byte(ok(1)+`{"index":3,"error":{"kind":"backend"}}`+"\n"+ok(4)+`{"ind`), true)
	f.Add([]byte(ok(0)+"\n  \n"+`{"index":1,"output":{"v":9}}`+"\n"+ok(5)), false)
	f.Add([]byte("not json\n"), false)
	final := map[int]*agent.State{}
	for i := range 5 {
		st := &agent.State{Index: i, Status: agent.StatusDone, Output: json.RawMessage(`{"v":` + string(rune('0'+i)) + `}`)}
		if i == 3 {
			st.Status, st.Output = agent.StatusFailed, nil
		}
		final[i] = st
	}
	f.Fuzz(func(t *testing.T, data []byte, ordered bool) {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		p := &Plan{final: final, drop: map[int]bool{2: len(data)%3 == 0}, inputs: 5, ordered: ordered}
		kept, err := p.reconcile(file, path)
		if err != nil {
			return
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		n := 0
		for line := range bytes.Lines(got) {
			var v struct {
				Index int `json:"index"`
			}
			if err := json.Unmarshal(line, &v); err != nil {
				t.Fatalf("kept line %q: %v", line, err)
			}
			if seen[v.Index] || final[v.Index] == nil || p.drop[v.Index] {
				t.Fatalf("kept line %q: index duplicated, without a final state, or dropped", line)
			}
			if ordered && v.Index != n {
				t.Fatalf("ordered: line %d holds index %d", n, v.Index)
			}
			seen[v.Index] = true
			n++
		}
		if len(seen) != len(kept) {
			t.Fatalf("reconcile reports %d lines kept, the file holds %d", len(kept), len(seen))
		}
		if pos, _ := file.Seek(0, 1); pos != int64(len(got)) {
			t.Fatalf("file left at %d, want its end %d", pos, len(got))
		}
	})
}
