package worker

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// keptEnv are the variables of the worker's own environment that every
// command sees; LC_* variables are kept too. Everything else — tokens,
// database addresses, cloud credentials, the worker's own SCIMESH_
// settings — stays with the worker unless the operator names it in
// Config.PassEnv (--pass-env).
var keptEnv = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR"}

// commandEnv is the environment of a command, chunk or tree task alike:
// the kept variables of the worker's own environment and those named by
// Config.PassEnv, then task (NAME=VALUE pairs), which win over both.
func (w *Worker) commandEnv(task ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if slices.Contains(keptEnv, k) || strings.HasPrefix(k, "LC_") || slices.Contains(w.cfg.PassEnv, k) {
			env = append(env, kv)
		}
	}
	return append(env, task...)
}

// checkEnvName checks a --pass-env name.
func checkEnvName(name string) error {
	ok := name != ""
	for i, c := range name {
		ok = ok && (c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9')
	}
	if !ok {
		return fmt.Errorf("--pass-env %q is not a variable name: give a NAME of letters, digits and _ that does not start with a digit", name)
	}
	return nil
}
