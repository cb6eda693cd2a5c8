package cli

import (
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
)

// runFile is a file a run reads or writes, as messages name it: an
// [outfile.File] under the names its callers spell.
type runFile struct {
	subject string // how it is named as the subject of a message: "--out", "output"
	object  string // how it is named as what another file is: "the inputs file", "the --out file"
	path    string // as given
	fix     string // for a file written, how to name it otherwise: "pick another --out"
}

// outputFile is the output of a run as checkRunFiles takes it: path, the
// --out flag's file (flag set) or the job file's output.
func outputFile(path string, flag bool) runFile {
	if flag {
		return runFile{subject: "--out", object: "the --out file", path: path, fix: "pick another --out"}
	}
	return runFile{subject: "output", object: "the output file", path: path, fix: "change output: in the job file, or pass --out"}
}

// jobReads returns the files a run of the job file at path reads: the job
// file, the inputs at inPath, the output schema files and the SQLite
// databases of its tools. Empty paths are left out.
func jobReads(path string, cj *config.Job, inPath string) []runFile {
	reads := []runFile{
		{object: "the job file", path: path},
		{object: "the inputs file", path: inPath},
		{object: "the output schema file", path: cj.SchemaFile},
	}
	if cj.Reduce != nil {
		reads = append(reads, runFile{object: "the reduce step's output schema file", path: cj.Reduce.SchemaFile})
	}
	for _, t := range cj.Tools {
		var db string
		switch s := t.Settings.(type) {
		case *config.SQLQuery:
			db = s.Database
		case *config.SQLLookup:
			db = s.Database
		}
		reads = append(reads, runFile{object: "the database of tool " + t.Name, path: db})
	}
	return reads
}

// checkRunFiles refuses a run whose files collide: see
// [outfile.CheckFiles].
func checkRunFiles(writes, reads []runFile) error {
	return outfile.CheckFiles(outfileFiles(writes), outfileFiles(reads))
}

// outfileFiles returns files as outfile names them.
func outfileFiles(files []runFile) []outfile.File {
	out := make([]outfile.File, len(files))
	for i, f := range files {
		out[i] = outfile.File{Subject: f.subject, Object: f.object, Path: f.path, Fix: f.fix}
	}
	return out
}
