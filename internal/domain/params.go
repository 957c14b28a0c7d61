package domain

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ParseParameterPairs turns KEY=VALUE pairs (VALUE a string) and
// KEY:=JSON pairs (any JSON value) into a job's parameters, a JSON
// object; no pairs are nil. Spaces around a KEY are dropped, a VALUE is
// taken as it is. The error of a malformed pair quotes it. It reads the
// CLI's --param flags and the dashboard's parameter lines.
func ParseParameterPairs(pairs []string) (json.RawMessage, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := map[string]json.RawMessage{}
	for _, p := range pairs {
		if k, v, ok := strings.Cut(p, ":="); ok && !strings.Contains(k, "=") {
			k = strings.TrimSpace(k)
			if k == "" || !json.Valid([]byte(v)) {
				return nil, fmt.Errorf("%q: KEY:=JSON needs a key and a valid JSON value", p)
			}
			m[k] = json.RawMessage(v)
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, fmt.Errorf("%q: write KEY=VALUE (a string) or KEY:=JSON", p)
		}
		b, _ := json.Marshal(v)
		m[k] = b
	}
	return json.Marshal(m)
}

// ParseParameterText reads the parameters a person types: a JSON object,
// or one KEY=VALUE or KEY:=JSON pair a line (ParseParameterPairs), blank
// lines skipped; only blanks are nil. Bad input is ErrInvalidArgument
// that says what to write.
func ParseParameterText(text string) (json.RawMessage, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "{") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, Invalidf("the parameters are not a JSON object: %v", err)
		}
		return json.RawMessage(text), nil
	}
	var pairs []string
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" {
			pairs = append(pairs, l)
		}
	}
	params, err := ParseParameterPairs(pairs)
	if err != nil {
		return nil, Invalidf("parameters: %v", err)
	}
	return params, nil
}
