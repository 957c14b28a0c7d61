package client_test

import (
	"testing"

	"github.com/scimesh/scimesh/internal/client"
)

// TestOnCoordinator holds the test that decides where the worker token
// goes with a task's input: only the coordinator's own
// "/tasks/{id}/input" below its base URL, and nothing a proxy in front of
// several applications could route to another one.
func TestOnCoordinator(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, input string
		want        bool
	}{
		{"http://gw:8080/scimesh", "/tasks/s0:a-0/input", true},
		{"http://gw:8080/scimesh/", "/tasks/s0:a-0/input", true},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/s0:a-0/input", true},
		{"http://gw:8080/scimesh", "HTTP://GW:8080/scimesh/tasks/s0:a-0/input", true},
		{"http://gw/scimesh", "http://gw:80/scimesh/tasks/1/input", true},
		{"https://gw/scimesh", "https://gw:443/scimesh/tasks/1/input", true},
		{"http://gw:8080", "/tasks/1/input", true},
		{"http://[::1]:8080/p", "http://[::1]:8080/p/tasks/1/input", true},
		// Resolved before it is sent: what goes on the wire is the input's URL.
		{"http://gw:8080", "http://gw:8080/x/../tasks/1/input", true},

		// Another application on the same host, port and scheme.
		{"http://gw:8080/scimesh", "http://gw:8080/echo/x", false},
		{"http://gw:8080/scimesh", "http://gw:8080/echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimeshx/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/SCIMESH/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/tasks/1/input", false},
		// Dot segments, literal or escaped, which a proxy resolves.
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/../echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "/../echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/%2e%2e/echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/%2E%2E/echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/../input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/%2e%2e/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/..%2f..%2fecho/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/..%5c..%5cecho/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/..;/echo/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/1/input/../../../../echo/x", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/s0%3Aa-0/input", false},
		// Not the input's exact URL.
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/1/input/", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/1/Input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh//tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks//input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/a/b/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/tasks/1/input?x=1", false},
		{"http://gw:8080/scimesh", "http://gw:8080/scimesh/jobs", false},
		// Another origin.
		{"http://gw:8080/scimesh", "http://gw:8081/scimesh/tasks/1/input", false},
		{"http://gw:8080/scimesh", "https://gw:8080/scimesh/tasks/1/input", false},
		{"https://gw/scimesh", "http://gw/scimesh/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw.:8080/scimesh/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://other:8080/scimesh/tasks/1/input", false},
		// User info, which may be the host in disguise.
		{"http://gw:8080/scimesh", "http://user:pw@gw:8080/scimesh/tasks/1/input", false},
		{"http://gw:8080/scimesh", "http://gw:8080@other/scimesh/tasks/1/input", false},
	} {
		if got := client.New(c.base, "t").OnCoordinator(c.input); got != c.want {
			t.Errorf("base %s: OnCoordinator(%q) = %v, want %v", c.base, c.input, got, c.want)
		}
	}
}
