package jobrun

import (
	"github.com/batchagent/batchagent/internal/config"
	"github.com/batchagent/batchagent/internal/outfile"
)

// OutputFile is the output of a run as outfile.CheckFiles takes it: path,
// the --out flag's file (flag set) or the job file's output.
func OutputFile(path string, flag bool) outfile.File {
	if flag {
		return outfile.File{Subject: "--out", Object: "the --out file", Path: path, Fix: "pick another --out"}
	}
	return outfile.File{Subject: "output", Object: "the output file", Path: path, Fix: "change output: in the job file, or pass --out"}
}

// Reads returns the files a run of the job file at path reads: the job
// file, the inputs at inPath, the output schema files and the SQLite
// databases of its tools. Empty paths are left out.
func Reads(path string, cj *config.Job, inPath string) []outfile.File {
	reads := []outfile.File{
		{Object: "the job file", Path: path},
		{Object: "the inputs file", Path: inPath},
		{Object: "the output schema file", Path: cj.SchemaFile},
	}
	if cj.Reduce != nil {
		reads = append(reads, outfile.File{Object: "the reduce step's output schema file", Path: cj.Reduce.SchemaFile})
	}
	for _, t := range cj.Tools {
		var db string
		switch s := t.Settings.(type) {
		case *config.SQLQuery:
			db = s.Database
		case *config.SQLLookup:
			db = s.Database
		}
		reads = append(reads, outfile.File{Object: "the database of tool " + t.Name, Path: db})
	}
	return reads
}
