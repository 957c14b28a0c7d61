// Package config turns a command's flags, the environment and the .env
// file into the settings of the coordinator, its maintenance commands and
// the worker. A flag given on the command line wins over the environment,
// which wins over .env (ENV_FILE names another file), which wins over the
// default. The commands declare the flags; this package reads them, checks
// the values and refuses settings that would expose a coordinator.
package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/joho/godotenv"
	"github.com/spf13/pflag"

	"github.com/scimesh/scimesh/internal/domain"
)

// Defaults of the settings.
const (
	DefaultDB          = "sqlite:./scimesh-data/scimesh.db"
	DefaultDataDir     = "./scimesh-data"
	DefaultAddr        = "127.0.0.1:8080"
	DefaultShard       = "s0"
	DefaultCoordinator = "http://127.0.0.1:8080"
)

// Source resolves the settings of one command.
type Source struct {
	flags  *pflag.FlagSet
	lookup func(key string) (string, bool) // the environment
	file   map[string]string               // the .env file's
}

// Load reads the .env file (or the one ENV_FILE names, which must exist)
// and returns the Source of flags, the process's environment and that file.
func Load(flags *pflag.FlagSet) (*Source, error) {
	path := os.Getenv("ENV_FILE")
	explicit := path != ""
	if path == "" {
		path = ".env"
	}
	m, err := godotenv.Read(path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && !explicit:
		m = map[string]string{}
	default:
		return nil, fmt.Errorf("read environment file %s: %w", path, err)
	}
	return &Source{flags: flags, lookup: os.LookupEnv, file: m}, nil
}

// Get returns the value of key from the environment, then the .env file.
func (s *Source) Get(key string) string {
	if v, ok := s.lookup(key); ok {
		return v
	}
	return s.file[key]
}

// Setting returns the flag's value when it was given, else key's in the
// environment or .env when not empty, else def.
func (s *Source) Setting(flag, key, def string) string {
	if f := s.flags.Lookup(flag); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := s.Get(key); v != "" {
		return v
	}
	return def
}

// changed reports whether any of flags was given on the command line.
func (s *Source) changed(flags ...string) bool {
	for _, name := range flags {
		if s.flags.Changed(name) {
			return true
		}
	}
	return false
}

// checkShard refuses a shard name that is not one.
func checkShard(s string) error {
	if !domain.ValidShard(s) {
		return fmt.Errorf("shard name %q must be 1-32 characters of a-z 0-9 -; set --shard or SCIMESH_SHARD", s)
	}
	return nil
}
