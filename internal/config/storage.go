package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Storage is where a coordinator's data lives: the settings that serve
// and prune share, resolved the same way for both.
type Storage struct {
	DB      string // the database URL
	DataDir string // the directory of uploads when Blobs is empty
	Blobs   string // the blob store's URL; empty: files under DataDir
}

// AddStorageFlags declares the storage settings' flags on f.
func AddStorageFlags(f *pflag.FlagSet) {
	f.String("db", DefaultDB, "database: sqlite:PATH or postgres://… (env DATABASE_URL)")
	f.String("data-dir", DefaultDataDir, "where uploaded tables live unless --blobs names a store (their chunks are byte ranges of them; results are in the database) (env SCIMESH_DATA_DIR)")
	f.String("blobs", "", "blob store for uploaded tables: s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION, credentials from the standard AWS "+
		"environment variables or files; empty keeps them in files under --data-dir (env SCIMESH_BLOBS)")
}

// Storage resolves the storage settings.
func (s *Source) Storage() Storage {
	return Storage{
		DB:      s.Setting("db", "DATABASE_URL", DefaultDB),
		DataDir: s.Setting("data-dir", "SCIMESH_DATA_DIR", DefaultDataDir),
		Blobs:   s.Setting("blobs", "SCIMESH_BLOBS", ""),
	}
}

// Defaults of retention.
const (
	DefaultRetention         = 720 * time.Hour
	DefaultUploadRetention   = 168 * time.Hour
	DefaultRetentionInterval = 10 * time.Minute
)

// Retention is how long what is finished is kept.
type Retention struct {
	Jobs    time.Duration // final jobs and finished trees; 0 keeps them
	Uploads time.Duration // uploads no unfinished job needs; 0 keeps them
}

// AddRetentionFlags declares the retention flags on f; jobsFlag names the
// one for jobs (--retention for serve, --older-than for prune).
func AddRetentionFlags(f *pflag.FlagSet, jobsFlag, jobsUsage string) {
	f.String(jobsFlag, DefaultRetention.String(), jobsUsage)
	f.String("upload-retention", DefaultUploadRetention.String(), "delete uploads unused for this long that no unfinished job needs, "+
		"with their files; 0 keeps them (env SCIMESH_UPLOAD_RETENTION)")
}

// Retention resolves the retention settings; jobsFlag is as for
// AddRetentionFlags.
func (s *Source) Retention(jobsFlag string) (Retention, error) {
	var r Retention
	for _, set := range []struct {
		flag, env string
		def       time.Duration
		to        *time.Duration
	}{
		{jobsFlag, "SCIMESH_RETENTION", DefaultRetention, &r.Jobs},
		{"upload-retention", "SCIMESH_UPLOAD_RETENTION", DefaultUploadRetention, &r.Uploads},
	} {
		d, err := parseRetention(s.Setting(set.flag, set.env, set.def.String()))
		if err != nil {
			return r, fmt.Errorf("--%s (or %s): %w", set.flag, set.env, err)
		}
		*set.to = d
	}
	return r, nil
}

// parseRetention reads a retention: a Go duration, 0 for ever.
func parseRetention(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("retention %q must be a duration such as 720h (30 days) or 90m, or 0 to keep everything", v)
	}
	return d, nil
}
