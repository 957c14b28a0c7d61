package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestParseParameterText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text, want, err string
	}{
		{"", "", ""},
		{"  \n\n ", "", ""},
		{"radius=2", `{"radius":"2"}`, ""},
		{"radius:=2\n\n  label = a b \nflags:=[1,true]", `{"flags":[1,true],"label":" a b","radius":2}`, ""},
		{"url=https://x.org/?a=b", `{"url":"https://x.org/?a=b"}`, ""},
		{"eq==", `{"eq":"="}`, ""},
		{`{"radius": 2, "on": true}`, `{"radius": 2, "on": true}`, ""},
		{"radius", "", `"radius": write KEY=VALUE`},
		{"=2", "", `"=2": write KEY=VALUE`},
		{"n:=two", "", `"n:=two": KEY:=JSON needs a key and a valid JSON value`},
		{`{"radius": 2`, "", "not a JSON object"},
		{`{} {}`, "", "not a JSON object"},
	} {
		got, err := domain.ParseParameterText(c.text)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, domain.ErrInvalidArgument)):
			t.Errorf("ParseParameterText(%q) = %s, %v; want an invalid argument saying %q", c.text, got, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("ParseParameterText(%q) = %s, %v; want %s", c.text, got, err, c.want)
		}
	}
}
