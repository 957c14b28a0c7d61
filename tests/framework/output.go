package framework

import (
	"fmt"
	"strings"
)

// LastLines is the end of a process's or a server's output, short enough
// that the failure it explains stays in view at the end of a test run.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[%d earlier lines left out]\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}
