// Package tanimoto is SciMesh's built-in workload "tanimoto": exact
// similarity search over bit-vector fingerprints.
//
// A task's chunk is CSV with the columns id and fingerprint (found by name
// when the chunk has a header line, else the first two columns), each
// fingerprint written in hex. The job's parameter "query" is a fingerprint
// in hex of the same length. Run writes the CSV "id,score" with a header and
// one row per input row, in input order, where score is the Tanimoto
// (Jaccard) similarity |A∧B| / |A∨B| of the row's fingerprint A and the
// query B, and 0 when both are empty.
//
// # Fingerprints
//
// A fingerprint of n hex digits is n·4 bits, so lengths count hex digits: a
// 2048-bit Morgan fingerprint is 512 digits, a 166-bit MACCS key padded to a
// whole byte is 42. Upper- and lower-case digits are both accepted. Digits
// 2k and 2k+1 are byte k of the vector, as in the FPS format of chemfp and
// RDKit's CreateFromFPSText; the order does not change a score, because
// query and row are read the same way. Lengths must be even: a byte is two
// digits.
//
// # Scores
//
// A score is float64(|A∧B|) / float64(|A∨B|): one correctly rounded
// division of two exact integers, which is what RDKit's TanimotoSimilarity
// computes too (RDKit gives 1 where both are empty; SciMesh's contract says
// 0). It is written by strconv.AppendFloat(score, 'g', -1, 64): precision -1
// means the fewest digits such that strconv.ParseFloat returns the same
// float64, so the text reads back exactly ("1", "0", "0.5",
// "0.3333333333333333", and exponent form such as "1.52587890625e-05" below
// 1e-4).
//
// # Errors
//
// Errors that the input or the parameters cause wrap ErrBadInput and name the
// 1-based line of the input, the header line counted: a fingerprint of
// another length or not in hex, a missing column, malformed CSV, a missing or
// malformed query. Running the task again cannot fix them, so the worker
// reports them as not retryable. Any other error (reading the input, writing
// the output, a cancelled context) is not ErrBadInput and may be retried.
//
// # CSV
//
// The input is read as encoding/csv reads it — RFC 4180 quoting, a quoted
// field may hold commas, doubled quotes and line ends, LF or CRLF line ends,
// blank lines skipped — but without encoding/csv on the hot path: a line
// without a quote is split at its commas, and only records that hold a quote
// go through a quote-aware parser, which fuzzing checks against
// encoding/csv. Rows need the columns the workload reads; further columns are
// ignored. A record longer than MaxRecordBytes (1 MiB, its line ends
// included) is bad input, refused once that much of it has been read, so
// that a line that never ends costs a few MiB of memory, not all there is. A leading UTF-8 byte order mark is dropped. The output is written
// as encoding/csv's writer would write it: LF line ends, fields quoted only
// when needed.
package tanimoto
