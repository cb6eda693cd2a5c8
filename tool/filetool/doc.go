// Package filetool provides file tools for agents: read_file, which returns
// the text of a file, or an image or a PDF as a media part ([ReadFile]), and
// list_dir, which lists a directory ([ListDir]). Both are [tool.Tool] values
// for a [tool.Pool]; read_file is a [tool.MediaTool].
//
// # Confinement
//
// Each tool is given root directories and reads nothing outside them: every
// path a model sends is opened through an [os.Root], so a path that leaves
// its root, by "..", by being absolute or through a symbolic link, is
// refused. With several roots the first root that has the path wins. The
// roots stay open until the tool is closed: the tools implement [io.Closer].
//
// # Errors
//
// Refusals and failures (a missing file, a directory where a file was
// expected, a binary or oversized file) are errors whose text is meant for
// the model, which the Pool sends back as the tool's result. A missing path's
// error wraps [io/fs.ErrNotExist]; malformed arguments wrap
// [tool.ErrBadArguments].
//
// The package imports the standard library, packages tool and llm, and
// internal/media, which sniffs images and PDFs.
package filetool
