//go:build race

package worker

// raceEnabled reports whether the binary was built with the race
// detector, whose runtime waits a second at exit unless told not to: the
// supervisor is told (supervisorEnv), or every command would take a
// second longer in the tests.
const raceEnabled = true
