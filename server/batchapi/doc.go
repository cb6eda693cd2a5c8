// Package batchapi serves OpenAI's Batch API: files (/v1/files:
// multipart upload with purpose batch, list, retrieve, content, delete)
// and batches (/v1/batches: create, retrieve, list with after and limit,
// cancel), with OpenAI's objects, statuses and output and error line
// format, for a caller's http.ServeMux ([Server.Routes]).
//
// A [Store] keeps them in one directory: an SQLite database of file and
// batch records, and one row per finished line of a batch, and the
// files' contents. A [Server] runs the batches of its store: a batch is
// validated (unique custom_id, method POST, url equal to the endpoint, a
// JSON object body, Config.MaxLines) while reading its file, failing
// with line-numbered errors; then its lines run as the file is read
// again, at most Config.Concurrency lines of all batches at once, each
// through the caller's [ExecFunc] (the gateway runs it as a chat
// completion in the batch class). A line refused for the moment (429,
// 502, 503, 504) is asked again with a growing pause until the window
// ends.
//
// Each finished line is recorded in the transaction that counts it
// (group-committed with the lines finishing at the same time), so a
// Server killed and started again on the same store resumes the batch
// without running a recorded line again; the output and error files are
// built from the recorded lines, in input order, when the batch ends.
// Lines not run when the window (Config.Window) ends or the batch is
// cancelled are in the error file as batch_expired or batch_cancelled.
//
// The caller authenticates requests: a request's owner ([WithOwner])
// owns the files and batches it creates and sees only its owner's.
package batchapi
