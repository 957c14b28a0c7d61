// Package migrate applies a store's embedded schema migrations. Each store
// embeds its own dialect's files, named NNNN_name.up.sql and
// NNNN_name.down.sql, and implements DB to run them.
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// Migration is one numbered schema change and its inverse.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// DB runs migrations on one database.
type DB interface {
	// AppliedVersions returns the versions applied so far, creating the
	// bookkeeping table when it does not exist.
	AppliedVersions(ctx context.Context) ([]int, error)
	// Apply runs m's Up (or Down when up is false) and records it, in one
	// transaction that excludes other migrators.
	Apply(ctx context.Context, m Migration, up bool) error
}

var fileRe = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// Load reads the migrations in the root of fsys, ordered by version.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := fileRe.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, path.Clean(e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mg
		}
		if m[3] == "up" {
			mg.Up = string(body)
		} else {
			mg.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s needs both an up and a down file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Up applies every migration not applied yet, in order, and returns the
// versions it applied.
func Up(ctx context.Context, db DB, ms []Migration) ([]int, error) {
	applied, err := appliedSet(ctx, db)
	if err != nil {
		return nil, err
	}
	var done []int
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := db.Apply(ctx, m, true); err != nil {
			return done, fmt.Errorf("apply migration %04d_%s: %w", m.Version, m.Name, err)
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// Down reverts the newest applied migration and returns its version, or 0
// when none is applied.
func Down(ctx context.Context, db DB, ms []Migration) (int, error) {
	applied, err := appliedSet(ctx, db)
	if err != nil {
		return 0, err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if !applied[m.Version] {
			continue
		}
		if err := db.Apply(ctx, m, false); err != nil {
			return 0, fmt.Errorf("revert migration %04d_%s: %w", m.Version, m.Name, err)
		}
		return m.Version, nil
	}
	return 0, nil
}

// State is one migration and whether it is applied.
type State struct {
	Migration
	Applied bool
}

// Status lists every migration and whether it is applied.
func Status(ctx context.Context, db DB, ms []Migration) ([]State, error) {
	applied, err := appliedSet(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]State, len(ms))
	for i, m := range ms {
		out[i] = State{Migration: m, Applied: applied[m.Version]}
	}
	return out, nil
}

// Pending reports how many migrations are not applied.
func Pending(ctx context.Context, db DB, ms []Migration) (int, error) {
	st, err := Status(ctx, db, ms)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range st {
		if !s.Applied {
			n++
		}
	}
	return n, nil
}

func appliedSet(ctx context.Context, db DB) (map[int]bool, error) {
	vs, err := db.AppliedVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	set := make(map[int]bool, len(vs))
	for _, v := range vs {
		set[v] = true
	}
	return set, nil
}
