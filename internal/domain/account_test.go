package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestValidAccountName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"admin": true, "a": true, "0": true, "alice.smith": true, "lab_2-b": true, strings.Repeat("a", 63): true,
		"": false, strings.Repeat("a", 64): false, "Alice": false, ".a": false, "-a": false, "_a": false,
		"a b": false, "a/b": false, "a:b": false, "é": false, "a\n": false,
	} {
		if got := ValidAccountName(name); got != want {
			t.Errorf("ValidAccountName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAccountValidate(t *testing.T) {
	t.Parallel()
	ok := Account{Name: "alice", Weight: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid account: %v", err)
	}
	for what, a := range map[string]Account{
		"bad name":          {Name: "Alice", Weight: 1},
		"weight 0":          {Name: "alice"},
		"weight too large":  {Name: "alice", Weight: MaxAccountWeight + 1},
		"negative running":  {Name: "alice", Weight: 1, MaxRunning: -1},
		"negative jobs":     {Name: "alice", Weight: 1, MaxJobs: -1},
		"negative storage":  {Name: "alice", Weight: 1, MaxStorage: -1},
		"running too large": {Name: "alice", Weight: 1, MaxRunning: MaxAccountCount + 1},
		"jobs too large":    {Name: "alice", Weight: 1, MaxJobs: MaxAccountCount + 1},
	} {
		if err := a.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
}
