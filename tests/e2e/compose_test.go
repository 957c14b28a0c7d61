package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// The compose file at the repository's root runs this binary in
// containers, which no test starts. These tests hold it to the binary's
// own --help instead, so that renaming a flag or a variable fails here and
// not in someone's `make up`.

// composeFile is the part of a compose file these tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

// composeService is one service of a compose file.
type composeService struct {
	Image       string      `yaml:"image"`
	Build       any         `yaml:"build"`
	Command     composeArgs `yaml:"command"`
	Environment composeEnv  `yaml:"environment"`
}

// composeArgs is a command in either of compose's forms: a list, or a
// string that compose splits at spaces.
type composeArgs []string

func (a *composeArgs) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*a = strings.Fields(n.Value)
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*a = list
	return nil
}

// composeEnv is an environment in either of compose's forms: a mapping,
// or a list of NAME=VALUE.
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]string{}
	if n.Kind == yaml.SequenceNode {
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	} else if err := n.Decode(&m); err != nil {
		return err
	}
	*e = m
	return nil
}

// loadCompose reads the compose file at the repository's root, with its
// anchors and merge keys resolved.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("parse compose.yaml: %v", err)
	}
	if len(f.Services) == 0 {
		t.Fatal("compose.yaml has no services")
	}
	return f
}

// runsScimesh reports whether a service runs the scimesh image: built from
// the Dockerfile here, or named so.
func (s composeService) runsScimesh() bool {
	return s.Build != nil || strings.HasPrefix(s.Image, "scimesh:") || s.Image == "scimesh"
}

// subcommand is the scimesh subcommand a service runs (its arguments
// before the first flag: serve, worker, migrate up), and the Dockerfile's
// CMD, serve, when the service gives no command.
func (s composeService) subcommand() []string {
	if len(s.Command) == 0 {
		return []string{"serve"}
	}
	i := slices.IndexFunc(s.Command, func(a string) bool { return strings.HasPrefix(a, "-") })
	if i < 0 {
		i = len(s.Command)
	}
	return s.Command[:i]
}

// runs reports whether the service runs `scimesh SUB …`.
func (s composeService) runs(sub string) bool {
	sc := s.subcommand()
	return s.runsScimesh() && len(sc) > 0 && sc[0] == sub
}

// flagValue is the value the service's command gives the flag (as
// `--flag VALUE` or `--flag=VALUE`), and whether it gives one.
func (s composeService) flagValue(flag string) (string, bool) {
	for i, a := range s.Command {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
		if a == flag && i+1 < len(s.Command) {
			return s.Command[i+1], true
		}
	}
	return "", false
}

// settingVar reports whether name is a variable that scimesh itself reads
// (not one of the AWS SDK's or another program's).
func settingVar(name string) bool {
	return strings.HasPrefix(name, "SCIMESH_") || name == "DATABASE_URL" || strings.HasSuffix(name, "_AUTH_TOKEN")
}

// helpFlagRe finds the flags a --help output declares, one a line
// ("  -h, --help", "      --addr string").
var helpFlagRe = regexp.MustCompile(`(?m)^\s+(?:(-[A-Za-z]), )?(--[a-z0-9][a-z0-9-]*)`)

// commandHelp is what `scimesh SUBCOMMAND --help` says: its text, and the
// flags it declares.
type commandHelp struct {
	text  string
	flags map[string]bool
}

// helpOf runs `scimesh SUB… --help`.
func helpOf(t *testing.T, sub []string) commandHelp {
	t.Helper()
	out, err := run(t, t.TempDir(), nil, append(slices.Clone(sub), "--help")...)
	if err != nil {
		t.Fatalf("scimesh %s --help: %v\n%s", strings.Join(sub, " "), err, out)
	}
	h := commandHelp{text: out, flags: map[string]bool{}}
	for _, m := range helpFlagRe.FindAllStringSubmatch(out, -1) {
		h.flags[m[2]] = true
		if m[1] != "" {
			h.flags[m[1]] = true
		}
	}
	if len(h.flags) < 2 {
		t.Fatalf("scimesh %s --help declares no flags but --help? Its output:\n%s", strings.Join(sub, " "), out)
	}
	return h
}

// mentions reports whether the help names the variable, as a whole word.
func (h commandHelp) mentions(name string) bool {
	return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(h.text)
}

// TestComposeMatchesHelp checks that every flag a scimesh service of
// compose.yaml passes, and every scimesh variable it sets, is one the
// subcommand it runs documents in its --help.
func TestComposeMatchesHelp(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	helps := map[string]commandHelp{}
	ran := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(f.Services)) {
		svc := f.Services[name]
		if !svc.runsScimesh() {
			continue
		}
		sub := svc.subcommand()
		if len(sub) == 0 {
			t.Errorf("service %s runs scimesh %v: a flag where the subcommand belongs", name, svc.Command)
			continue
		}
		key := strings.Join(sub, " ")
		h, ok := helps[key]
		if !ok {
			h = helpOf(t, sub)
			helps[key] = h
		}
		ran[sub[0]] = true
		for _, arg := range svc.Command[len(sub):] {
			if !strings.HasPrefix(arg, "-") || arg == "-" {
				continue // a flag's value
			}
			flag, _, _ := strings.Cut(arg, "=")
			if !h.flags[flag] {
				t.Errorf("service %s runs `scimesh %s` with %s, which `scimesh %s --help` does not declare", name, key, flag, key)
			}
		}
		vars := 0
		for _, v := range slices.Sorted(maps.Keys(svc.Environment)) {
			if !settingVar(v) {
				continue
			}
			vars++
			if !h.mentions(v) {
				t.Errorf("service %s sets %s, which `scimesh %s --help` does not name", name, v, key)
			}
		}
		// Each of them needs a database or a token at least; none set means
		// the environment went unread (an unresolved merge key, say), and
		// the check above would pass for nothing.
		if vars == 0 {
			t.Errorf("service %s runs `scimesh %s` but sets no scimesh variable (DATABASE_URL, SCIMESH_*, *_AUTH_TOKEN)", name, key)
		}
	}
	for _, want := range []string{"serve", "worker", "migrate"} {
		if !ran[want] {
			t.Errorf("compose.yaml has no service that runs `scimesh %s`; services: %v", want, slices.Sorted(maps.Keys(f.Services)))
		}
	}
}

// TestComposeTokens checks that the services agree on the tokens: the
// coordinators' three differ (serve refuses to start otherwise), every
// coordinator has the same ones, and each worker sends the worker token of
// the coordinator it names.
func TestComposeTokens(t *testing.T) {
	t.Parallel()
	f := loadCompose(t)
	tokens := map[string]string{} // role → the value every coordinator has
	for _, name := range slices.Sorted(maps.Keys(f.Services)) {
		svc := f.Services[name]
		if !svc.runs("serve") {
			continue
		}
		seen := map[string]string{}
		for _, role := range []string{"WORKER", "CLIENT", "PEER"} {
			v := svc.Environment[role+"_AUTH_TOKEN"]
			if v == "" {
				t.Errorf("coordinator %s sets no %s_AUTH_TOKEN", name, role)
				continue
			}
			// Equal as compose gives them when no variable is set (equal
			// defaults), or once the variables are set (the same ones).
			forms := []string{"default " + interpolateDefaults(v)}
			if names := interpolateRe.FindAllStringSubmatch(v, -1); len(names) > 0 {
				form := "variables"
				for _, n := range names {
					form += " " + n[1]
				}
				forms = append(forms, form)
			}
			for _, form := range forms {
				if other, ok := seen[form]; ok {
					t.Errorf("coordinator %s: %s_AUTH_TOKEN (%s) and %s_AUTH_TOKEN are equal; serve refuses equal tokens", name, role, v, other)
				}
				seen[form] = role
			}
			if prev, ok := tokens[role]; ok && prev != v {
				t.Errorf("coordinator %s: %s_AUTH_TOKEN is %q, another coordinator's %q", name, role, v, prev)
			}
			tokens[role] = v
		}
	}
	if len(tokens) == 0 {
		t.Fatal("compose.yaml has no coordinator (a service that runs `scimesh serve`)")
	}
	workers := 0
	for _, name := range slices.Sorted(maps.Keys(f.Services)) {
		svc := f.Services[name]
		if !svc.runs("worker") {
			continue
		}
		workers++
		url, ok := svc.flagValue("--coordinator")
		if !ok {
			url, ok = svc.Environment["SCIMESH_COORDINATOR"]
		}
		if !ok {
			t.Errorf("worker %s names no --coordinator (its default, loopback, is its own container)", name)
		} else if host := coordinatorHost(url); !f.Services[host].runs("serve") {
			t.Errorf("worker %s: --coordinator %s is not a coordinator of compose.yaml", name, url)
		}
		got := svc.Environment["SCIMESH_TOKEN"]
		if got == "" {
			got = svc.Environment["WORKER_AUTH_TOKEN"]
		}
		if got != tokens["WORKER"] {
			t.Errorf("worker %s sends the token %q, the coordinators' WORKER_AUTH_TOKEN is %q", name, got, tokens["WORKER"])
		}
	}
	if workers == 0 {
		t.Error("compose.yaml has no worker (a service that runs `scimesh worker`)")
	}
}

// interpolateRe finds compose's ${NAME}, ${NAME:-DEFAULT} and
// ${NAME-DEFAULT}: the name, then the default.
var interpolateRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

// interpolateDefaults is s as compose makes it when none of the variables
// it names is set: each replaced by its default, or by nothing.
func interpolateDefaults(s string) string {
	return interpolateRe.ReplaceAllString(s, "$2")
}

// coordinatorHost is the host of a coordinator URL such as
// http://coordinator-1:8080.
func coordinatorHost(url string) string {
	_, rest, _ := strings.Cut(url, "://")
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, ":")
	return host
}
