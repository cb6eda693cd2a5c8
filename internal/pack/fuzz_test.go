package pack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchagent/batchagent/internal/pack"
	"github.com/google/go-cmp/cmp"
)

// FuzzScanner feeds an answer to a Scanner whole and in pieces whose
// lengths cuts gives (see split). It checks that the scanner never
// panics, that the pieces change nothing, that every entry has either a
// valid JSON value or an error, and that an answer that is one valid JSON
// object gives that object's members in order, its duplicates too.
func FuzzScanner(f *testing.F) {
	for _, tt := range scanTests {
		f.Add(tt.answer, []byte{})
		f.Add(tt.answer, []byte{3, 0, 7})
	}
	f.Add(`{"a1":"\ud83d\ude00","a2":"\ud800"}`, []byte{5})
	f.Add("{\"a\xff\":\"\xe6\x97\xa5\"}", []byte{3, 1})
	f.Fuzz(func(t *testing.T, answer string, cuts []byte) {
		whole := scan(answer)
		if got := scan(split(answer, cuts)...); !cmp.Equal(whole, got) {
			t.Fatalf("scan(%q) in pieces %v differs from whole (-whole +pieces):\n%s", answer, cuts, cmp.Diff(whole, got))
		}
		var s pack.Scanner
		var entries []pack.Entry
		s.Write(answer, func(e pack.Entry) { entries = append(entries, e) })
		for _, e := range entries {
			if (e.Err == nil) != json.Valid(e.Value) || (e.Err != nil) != (e.Value == nil) {
				t.Fatalf("scan(%q): entry %q has Value %q and Err %v, want a valid value or an error", answer, e.ID, e.Value, e.Err)
			}
		}
		want, ok := members(answer)
		if !ok {
			return
		}
		var got []entry
		for _, e := range entries {
			got = append(got, entry{ID: e.ID, Value: compact(t, e.Value)})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("scan(%q) entries mismatch with encoding/json (-want +got):\n%s", answer, diff)
		}
		if !s.Closed() || s.Err() != nil {
			t.Fatalf("scan(%q): Closed, Err = %t, %v; want true, nil", answer, s.Closed(), s.Err())
		}
	})
}

// split cuts s into pieces whose lengths are the bytes of cuts modulo
// 17, cycling; 0 is an empty piece. No cuts, or only zeros: byte by byte.
func split(s string, cuts []byte) []string {
	if !slices.ContainsFunc(cuts, func(c byte) bool { return c%17 != 0 }) {
		return bytewise(s)
	}
	var pieces []string
	for i := 0; len(s) > 0; i++ {
		n := min(int(cuts[i%len(cuts)])%17, len(s))
		pieces = append(pieces, s[:n])
		s = s[n:]
	}
	return pieces
}

// members returns the members of answer, in order, as encoding/json reads
// them, values compacted, when answer is one valid JSON object.
func members(answer string) ([]entry, bool) {
	if !json.Valid([]byte(answer)) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(answer)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var ms []entry
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return nil, false
		}
		ms = append(ms, entry{ID: k.(string), Value: c.String()})
	}
	return ms, true
}

// compact returns v with insignificant whitespace removed.
func compact(t *testing.T, v []byte) string {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, v); err != nil {
		t.Fatalf("json.Compact(%q): %v", v, err)
	}
	return c.String()
}

// FuzzTasks writes the tasks of joined (split at NUL bytes) with Tasks
// and reads them back with ParseTasks: they come back as they were, each
// byte of invalid UTF-8 as U+FFFD. It also reads joined itself as a
// message: ParseTasks never panics and fails only with ErrNotPacked.
func FuzzTasks(f *testing.F) {
	f.Add("classify: good\x00say \"hi\"\nTasks:\n{}")
	f.Add("\xff\xed\xa0\x80\x00")
	f.Add("Tasks:\n{\n\"a1\": \"x\",\n\"a2\": \"y\"\n}")
	f.Fuzz(func(t *testing.T, joined string) {
		tasks := strings.Split(joined, "\x00")
		ids, got, err := pack.ParseTasks(pack.Tasks(tasks))
		if err != nil {
			t.Fatalf("ParseTasks(Tasks(%q)): %v", tasks, err)
		}
		want := make([]string, len(tasks))
		wantIDs := make([]string, len(tasks))
		for i, task := range tasks {
			want[i] = validUTF8(task)
			wantIDs[i] = pack.ID(i)
		}
		if !slices.Equal(ids, wantIDs) || !slices.Equal(got, want) {
			t.Fatalf("ParseTasks(Tasks(%q)) = %q, %q; want %q, %q", tasks, ids, got, wantIDs, want)
		}
		if _, _, err := pack.ParseTasks(joined); err != nil && !errors.Is(err, pack.ErrNotPacked) {
			t.Fatalf("ParseTasks(%q) = %v, want nil or ErrNotPacked", joined, err)
		}
	})
}

// validUTF8 returns s with each byte of invalid UTF-8 replaced by U+FFFD,
// as json.Marshal writes it.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // ranging yields U+FFFD for each invalid byte
	}
	return b.String()
}
