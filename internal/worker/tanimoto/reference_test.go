package tanimoto

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"
)

// referenceRun is Run written the slow, obvious way, on encoding/csv and
// the bit-by-bit reference: the oracle of the differential tests. It
// returns the output, or the line that a bad input names (0 for the
// parameters), or a non-bad-input error.
func referenceRun(t testing.TB, query string, hasHeader bool, input []byte) (out []byte, badLine int, bad bool) {
	t.Helper()
	if query == "" || len(query)%2 != 0 {
		return nil, 0, true
	}
	for i := range len(query) {
		if hexVal[query[i]] == 0xff {
			return nil, 0, true
		}
	}
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(input, []byte("\ufeff"))))
	r.FieldsPerRecord = -1
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write([]string{"id", "score"}); err != nil {
		t.Fatal(err)
	}
	idIdx, fpIdx := 0, 1
	first := true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("encoding/csv: %v", err)
			}
			return nil, pe.StartLine, true
		}
		line, _ := r.FieldPos(0)
		if first && hasHeader {
			first = false
			idIdx, fpIdx = -1, -1
			for i, f := range rec {
				switch {
				case f == "id" && idIdx >= 0, f == "fingerprint" && fpIdx >= 0:
					return nil, line, true
				case f == "id":
					idIdx = i
				case f == "fingerprint":
					fpIdx = i
				}
			}
			if idIdx < 0 || fpIdx < 0 {
				return nil, line, true
			}
			continue
		}
		if len(rec) <= max(idIdx, fpIdx) {
			return nil, line, true
		}
		fp := rec[fpIdx]
		if len(fp) != len(query) {
			return nil, line, true
		}
		for i := range len(fp) {
			if hexVal[fp[i]] == 0xff {
				return nil, line, true
			}
		}
		score := reference(t, fp, query)
		if err := w.Write([]string{rec[idIdx], strconv.FormatFloat(score, 'g', -1, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	return buf.Bytes(), 0, false
}

// params returns the parameters JSON for query.
func params(query string) json.RawMessage {
	b, err := json.Marshal(map[string]string{"query": query})
	if err != nil {
		panic(err)
	}
	return b
}
