package main

import (
	"bufio"
	"bytes"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLinkerDropsUnusedMethods links the command and fails when the linker
// can reach a function that calls methods by name through reflection
// (reflect's Method or MethodByName with a name not known when linking:
// text/template's field evaluation, say). One such function anywhere in
// the program makes the linker keep every exported method of every type
// the program uses: it did (html/template in the HTML report, gRPC's
// x/net/trace under the OTLP exporter), and the binary was 150 MB instead
// of 93 MB, its resident set 12 MB larger before it ran anything (bench
// fair -n 200: a 50 MB peak instead of 38). Package reflect's own
// iterator over methods is marked too, and does not stop the pruning.
func TestLinkerDropsUnusedMethods(t *testing.T) {
	if testing.Short() {
		t.Skip("links the whole command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(t.TempDir(), "batchagent"), "-ldflags=-dumpdep", ".")
	var deps bytes.Buffer
	cmd.Stderr = &deps
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%.2000s", err, deps.String())
	}
	// Every line is an edge "from -> to" the linker followed from a
	// reachable symbol; a reachable caller by name is marked <ReflectMethod>.
	found := map[string]bool{}
	sc := bufio.NewScanner(&deps)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		from, _, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		if sym, marked := strings.CutSuffix(from, " <ReflectMethod>"); marked && !strings.HasPrefix(sym, "reflect.") {
			found[sym] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("the linker can reach functions that call methods by name through reflection, so it keeps every exported method: %v", slices.Sorted(maps.Keys(found)))
	}
}
