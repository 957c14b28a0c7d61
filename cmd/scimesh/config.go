package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/joho/godotenv"
	"github.com/spf13/cobra"

	"github.com/scimesh/scimesh/internal/domain"
)

// Defaults of the settings.
const (
	defaultDB      = "sqlite:./scimesh-data/scimesh.db"
	defaultDataDir = "./scimesh-data"
	defaultAddr    = "127.0.0.1:8080"
	defaultShard   = "s0"
)

// env resolves settings: real environment variables win over the .env file
// (ENV_FILE names another), and flags, checked by the caller, win over both.
type env struct {
	file map[string]string
}

func loadEnv() (*env, error) {
	path := os.Getenv("ENV_FILE")
	explicit := path != ""
	if path == "" {
		path = ".env"
	}
	m, err := godotenv.Read(path)
	switch {
	case err == nil:
		return &env{file: m}, nil
	case errors.Is(err, os.ErrNotExist) && !explicit:
		return &env{file: map[string]string{}}, nil
	}
	return nil, fmt.Errorf("read environment file %s: %w", path, err)
}

// get returns the value of key from the environment, then the .env file.
func (e *env) get(key string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return e.file[key]
}

// setting returns the flag's value when it was set, else the environment's,
// else def.
func (e *env) setting(cmd *cobra.Command, flag, key, def string) string {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := e.get(key); v != "" {
		return v
	}
	return def
}

func checkShard(s string) error {
	if !domain.ValidShard(s) {
		return fmt.Errorf("shard name %q must be 1-32 characters of a-z 0-9 -; set --shard or SCIMESH_SHARD", s)
	}
	return nil
}

// storageConfig is where a coordinator's data lives: the settings that
// serve and prune share, resolved the same way for both.
type storageConfig struct {
	DB      string // the database URL
	DataDir string // the directory of uploads when Blobs is empty
	Blobs   string // the blob store's URL; empty: files under DataDir
}

// addStorageFlags declares the storage settings' flags on cmd.
func addStorageFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("db", defaultDB, "database: sqlite:PATH or postgres://… (env DATABASE_URL)")
	f.String("data-dir", defaultDataDir, "where uploaded tables live unless --blobs names a store (their chunks are byte ranges of them; results are in the database) (env SCIMESH_DATA_DIR)")
	f.String("blobs", "", "blob store for uploaded tables: s3://BUCKET[/PREFIX]?endpoint=URL&region=REGION, credentials from the standard AWS "+
		"environment variables or files; empty keeps them in files under --data-dir (env SCIMESH_BLOBS)")
}

// resolveStorage resolves the storage settings from cmd's flags, the
// environment and .env.
func resolveStorage(cmd *cobra.Command, e *env) storageConfig {
	return storageConfig{
		DB:      e.setting(cmd, "db", "DATABASE_URL", defaultDB),
		DataDir: e.setting(cmd, "data-dir", "SCIMESH_DATA_DIR", defaultDataDir),
		Blobs:   e.setting(cmd, "blobs", "SCIMESH_BLOBS", ""),
	}
}

// Defaults of retention (SPEC §7).
const (
	defaultRetention         = 720 * time.Hour
	defaultUploadRetention   = 168 * time.Hour
	defaultRetentionInterval = 10 * time.Minute
)

// retentionConfig is how long what is finished is kept.
type retentionConfig struct {
	Retention       time.Duration // final jobs and finished trees; 0 keeps them
	UploadRetention time.Duration // uploads no unfinished job needs; 0 keeps them
}

// addRetentionFlags declares the retention flags on cmd; jobsFlag names the
// one for jobs (--retention for serve, --older-than for prune).
func addRetentionFlags(cmd *cobra.Command, jobsFlag, jobsUsage string) {
	f := cmd.Flags()
	f.String(jobsFlag, defaultRetention.String(), jobsUsage)
	f.String("upload-retention", defaultUploadRetention.String(), "delete uploads unused for this long that no unfinished job needs, "+
		"with their files; 0 keeps them (env SCIMESH_UPLOAD_RETENTION)")
}

// resolveRetention resolves the retention settings; jobsFlag is as for
// addRetentionFlags.
func resolveRetention(cmd *cobra.Command, e *env, jobsFlag string) (retentionConfig, error) {
	var c retentionConfig
	for _, s := range []struct {
		flag, env string
		def       time.Duration
		to        *time.Duration
	}{
		{jobsFlag, "SCIMESH_RETENTION", defaultRetention, &c.Retention},
		{"upload-retention", "SCIMESH_UPLOAD_RETENTION", defaultUploadRetention, &c.UploadRetention},
	} {
		d, err := parseRetention(e.setting(cmd, s.flag, s.env, s.def.String()))
		if err != nil {
			return c, fmt.Errorf("--%s (or %s): %w", s.flag, s.env, err)
		}
		*s.to = d
	}
	return c, nil
}

// parseRetention reads a retention: a Go duration, 0 for ever.
func parseRetention(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("retention %q must be a duration such as 720h (30 days) or 90m, or 0 to keep everything", v)
	}
	return d, nil
}
