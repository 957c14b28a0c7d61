// Package table holds CSV-aware helpers for task outputs: TopK keeps, on a
// worker, the best rows of a workload's output as it streams in, ParseOutput
// checks that result before the coordinator records it, and Merge stitches
// the recorded chunk outputs of a job into its final CSV. For uploads,
// Normalize checks a table as it streams and writes its canonical form, and
// Split divides that form into a job's chunks. It is pure: no I/O beyond the
// readers and writers passed in, no clock, no randomness.
//
// The rules that TopK, ParseOutput and Merge share, read by one scanner so
// that a worker and its coordinator cannot disagree:
//
//   - An output is CSV as encoding/csv reads it: RFC 4180 quoting (a quoted
//     field may hold commas, doubled quotes and newlines), LF or CRLF line
//     ends, blank lines skipped, every record as many fields as the header.
//   - The first record is the header. It must name the score column exactly
//     once; an empty score column name is refused, because Go's CSV writer
//     writes a record of one empty field as a blank line, which would not
//     read back.
//   - A leading UTF-8 byte order mark is dropped, as /upload drops one, so
//     "\ufeffscore" at the start of a header reads as "score". The first
//     header name never starts with a mark: repeated marks, and marks inside
//     a quoted first name, are dropped too, because the final CSV would
//     write such a name unquoted at the start of the file and its reader
//     would drop the mark, changing the header under a round trip. A mark
//     anywhere else is data. Line numbers are unaffected; column numbers in
//     error messages count the bytes of the original input.
//   - Inside a field, CRs before an LF are dropped. encoding/csv already
//     reads a quoted CR LF as LF, but a run such as CR CR LF leaves a CR LF
//     in the field, which its writer cannot write back. With this rule every
//     field survives re-encoding: the final CSV reads back as the rows it
//     was made of, and merging it again gives the same bytes.
//   - Every score is a finite float64 as strconv.ParseFloat reads it, with
//     no surrounding spaces; NaN, ±Inf, out-of-range and empty scores are
//     refused. -0 and 0 are equal scores.
//
// Errors about the data wrap domain.ErrInvalidArgument and name the line
// where the offending record starts; for malformed CSV, also the line and
// column of the fault.
//
// TopK ranks rows by score in the job's order, ties to the earlier row.
// Merge ranks them the same way, ties broken by chunk index and then by row
// order within the chunk's output. That is a total order, so the final CSV
// is the same bytes for the same chunk outputs whatever order they are
// passed in. Both write with encoding/csv's writer: LF line ends, every
// line terminated, fields quoted only when needed; every field is
// re-encoded, so unnecessary quoting in the inputs does not survive.
package table
