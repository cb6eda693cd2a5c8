package cli_test

import (
	"os"
	"strings"
	"testing"
)

// objectSchema is an output_schema line for jobs whose results tests decode.
const objectSchema = "output_schema: {type: object, properties: {value: {type: integer}}, required: [value]}\n"

// TestRunRefusesMissingPlaceholders runs jobs whose task template refers to
// a field the inputs lack: the run must stop at load with exit 2, naming the
// placeholder, the task and the input file, before any agent runs.
func TestRunRefusesMissingPlaceholders(t *testing.T) {
	tests := []struct {
		name, task, file, content string
		want                      []string
	}{
		{
			"CSV header", "Summarize {title} by {author}", "in.csv", "id,title\n1,a\n2,b\n",
			[]string{"job.yaml: task: placeholder {author} has no field in the header of in.csv", `which has fields "id", "title"`},
		},
		{
			"CSV header, two missing, nested", "{user.name} {id} {tag}", "in.csv", "id\n1\n",
			[]string{"task: placeholders {user.name}, {tag} have no fields in the header of in.csv", `fields "id"`},
		},
		{
			"first JSONL object", "Greet {name}", "in.jsonl", "\n{bad\n{\"nmae\":\"a\",\"id\":1}\n{\"name\":\"b\"}\n",
			[]string{"job.yaml: task: placeholder {name} has no field in the first object of in.jsonl", `which has fields "id", "nmae"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=1\"\ntask: \""+tt.task+"\"\n")
			in := writeFile(t, dir, tt.file, tt.content)
			out := dir + "/out.jsonl"
			code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output %s exists (err %v), want no output for a refused job", out, err)
			}
		})
	}
}

// TestRunAcceptsPresentPlaceholders checks that the load-time placeholder
// check lets through inputs that have every top-level field, including a
// nested placeholder whose top-level key is present and a JSONL file whose
// first line is malformed.
func TestRunAcceptsPresentPlaceholders(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=1\"\ntask: \"Greet {user.name} ({id})\"\n"+objectSchema)
	in := writeFile(t, dir, "in.jsonl", "{oops\n{\"id\":1,\"user\":{\"name\":\"a\"}}\n{\"id\":2,\"user\":{\"name\":\"b\"}}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--ordered", "--quiet")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (line 1 is an input error); stderr:\n%s", code, stderr)
	}
	lines := readLines(t, stdout)
	if len(lines) != 3 || lines[0].Error == nil || lines[0].Error.Kind != "input" || lines[1].Error != nil || lines[2].Error != nil {
		t.Errorf("results = %+v, want an input error, then two results", lines)
	}
}

// TestRunRefusesSchemaCycle runs a job whose output schema file has a $ref
// cycle: the run must stop at load with exit 2, naming the file and the
// cycle, instead of failing every input after three model calls.
func TestRunRefusesSchemaCycle(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "cycle.json", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`)
	job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=1\"\ntask: \"Do {id}\"\noutput_schema: cycle.json\n")
	in := writeFile(t, dir, "in.jsonl", "{\"id\":1}\n")
	out := dir + "/out.jsonl"
	code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--out", out)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	for _, w := range []string{"job.yaml", "cycle.json", "reference cycle", "#/$defs/a $ref→ #/$defs/b $ref→ #/$defs/a"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output %s exists (err %v), want none", out, err)
	}

	// A recursive schema that descends into the instance still runs.
	writeFile(t, dir, "tree.json", `{"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}`)
	job = writeFile(t, dir, "tree.yaml", "backend: \"sim://?seed=1\"\ntask: \"Do {id}\"\noutput_schema: tree.json\n")
	if code, _, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--quiet"); code != 0 {
		t.Errorf("tree schema: exit %d, want 0; stderr:\n%s", code, stderr)
	}
}

// TestRunDuplicateKeyFailsThatInput runs JSONL inputs where one line names
// a key twice and one holds a lone surrogate: those inputs fail with an
// input error naming the line and key, the others run.
func TestRunDuplicateKeyFailsThatInput(t *testing.T) {
	dir := t.TempDir()
	job := writeFile(t, dir, "job.yaml", "backend: \"sim://?seed=1\"\ntask: \"Greet {name}\"\n"+objectSchema)
	in := writeFile(t, dir, "in.jsonl", "{\"name\":\"a\"}\n{\"name\":\"a\",\"name\":\"EVIL\"}\n{\"name\":\"\\ud800\"}\n{\"name\":\"d\"}\n")
	code, stdout, stderr := run(t, t.Context(), "run", job, "--inputs", in, "--ordered", "--quiet")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	var got []string
	for _, l := range readLines(t, stdout) {
		s := "ok"
		if l.Error != nil {
			s = l.Error.Kind + ": " + l.Error.Message
		}
		got = append(got, s)
	}
	want := []string{"ok", `input: in.jsonl:2: duplicate key "name"`, `input: in.jsonl:3: invalid UTF-8: lone surrogate escape \ud800 in a string at $.name`, "ok"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("results = %q, want %q", got, want)
	}
}
