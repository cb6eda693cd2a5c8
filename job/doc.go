// Package job holds what a batch job is made of: the task template that is
// rendered once per input row, and the row itself ([Input]). It does no
// I/O: package input reads rows from slices, JSON Lines and CSV.
//
// # Templates
//
// [ParseTemplate] parses text with {field} placeholders into an immutable
// [Template]. {user.name} reaches into nested objects and {tags.0} into
// arrays; "{{" and "}}" are literal braces. [Template.Render] fills the
// placeholders from an [Input]: strings go in as they are, numbers as decimal
// text, objects and arrays as compact JSON. A missing field is a
// *[MissingFieldError], so a bad row fails alone. [Template.MissingFields]
// compares a template's fields with what an input source provides (the
// names input.CSVHeader reads, the keys input.JSONLFields returns), so that
// a misspelt placeholder is found before any row is rendered.
package job
