package httpapi

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	// The API's bodies go through segmentio/encoding/json, encoding/json's
	// API and behaviour at a fraction of its CPU (bench/NOTES.md).
	"github.com/segmentio/encoding/json"

	"github.com/scimesh/scimesh/internal/auth"
	"github.com/scimesh/scimesh/internal/domain"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // a failed write means the client went away
}

// decode reads one JSON object from r's body (bounded by the gate) into
// v: unknown fields, wrong types, trailing data and bodies over the
// route's bound are errors worded for people.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	return decodeBytes(data, v)
}

// decodeOptional is decode for a route whose body may be left out: an
// empty body leaves v as it is.
func decodeOptional(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return decodeBytes(data, v)
}

// bodyError words an error reading a request body: over the route's
// bound, too slow, or cut.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	var slow *auth.SlowBodyError
	switch {
	case errors.As(err, &tooBig):
		return fmt.Errorf("request body is over %d bytes, the most this route takes: %w", tooBig.Limit, domain.ErrTooLarge)
	case errors.As(err, &slow):
		return domain.Invalidf("%v", slow)
	}
	return domain.Invalidf("could not read the request body: %v", err)
}

func decodeBytes(data []byte, v any) error {
	rest, err := json.Parse(data, v, json.DisallowUnknownFields)
	if err == nil && len(rest) == 0 { // Parse skips the JSON whitespace after the value
		return nil
	}
	// A body refused is decoded again by encoding/json, whose errors say
	// where and what (segmentio's quote the input instead), so that its
	// words, and the verdict, are the standard library's.
	return decodeStd(data, v)
}

// decodeStd is decodeBytes by encoding/json alone: the reference whose
// verdicts and words decodeBytes gives.
func decodeStd(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return domain.Invalidf("request body is empty; send a JSON object")
	}
	dec := stdjson.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return domain.Invalidf("request body: %s", describeJSONError(err))
	}
	if dec.More() {
		return domain.Invalidf("request body has data after its JSON object; send exactly one object")
	}
	return nil
}

func describeJSONError(err error) string {
	var typeErr *stdjson.UnmarshalTypeError
	var syntaxErr *stdjson.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return fmt.Sprintf("expected a JSON %s, got %s", typeErr.Type, typeErr.Value)
		}
		return fmt.Sprintf("field %q must be %s, got %s", field, jsonTypeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ") + "; remove it"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "JSON ends too early"
	}
	return err.Error()
}

func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "bool"):
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}
