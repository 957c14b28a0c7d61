package config

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

func TestDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    time.Time
		wantErr string
	}{
		{"none", nil, nil, time.Time{}, ""},
		{"a runtime", []string{"--max-runtime", "3h50m"}, nil, now.Add(3*time.Hour + 50*time.Minute), ""},
		{"a time", []string{"--until", "2030-01-02T15:04:05Z"}, nil, time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC), ""},
		{"from the environment", nil, map[string]string{"SCIMESH_MAX_RUNTIME": "90m"}, now.Add(90 * time.Minute), ""},
		{"a flag wins over both variables", []string{"--until", "2030-01-03T00:00:00Z"}, map[string]string{"SCIMESH_MAX_RUNTIME": "90m"},
			time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC), ""},
		{"both", []string{"--max-runtime", "1h", "--until", "2030-01-03T00:00:00Z"}, nil, time.Time{}, "not both"},
		{"a runtime that is not positive", []string{"--max-runtime", "0s"}, nil, time.Time{}, "positive duration"},
		{"a time that is not RFC 3339", []string{"--until", "tomorrow"}, nil, time.Time{}, "RFC 3339"},
	} {
		s := source(t, AddDeadlineFlags, c.args, c.env, nil)
		got, err := s.Deadline(now)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %v, %v; want an error with %q", c.name, got, err, c.wantErr)
		case c.wantErr == "" && (err != nil || !got.Equal(c.want)):
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestDefaultWorkerID(t *testing.T) {
	t.Parallel()
	id := DefaultWorkerID()
	if !domain.ValidWorkerID(id) || !strings.HasSuffix(id, "-"+strconv.Itoa(os.Getpid())) {
		t.Fatalf("DefaultWorkerID %q: want a valid worker ID ending in -PID", id)
	}
}
