package domain

import (
	"encoding/json"
	"time"
)

// Job is a client's request to score a table with a workload and keep the
// best TopK rows. Its tasks form a tree: chunk tasks under one stitch task.
type Job struct {
	ID             string
	Name           string
	Owner          string // the account that created it
	Workload       string
	Parameters     json.RawMessage // a JSON object, never nil: "{}" when none
	ChunkRows      int
	HasHeader      bool
	TopK           int
	ScoreColumn    string
	Order          Order
	MaxAttempts    int
	LeaseSeconds   int
	TimeoutSeconds int // how long one attempt of a chunk may run; 0 for no limit
	Priority       int
	Workers        WorkerMode // who may run its chunks
	Quorum         int        // for WorkersAny: accounts that must agree on an untrusted output; else 0
	Columns        []string   // input columns the final CSV carries after the outputs' own; nil when none
	IDColumn       string     // the column that joins outputs to input rows; "" when Columns is nil
	NoCache        bool       // the job neither reuses remembered chunk outputs nor adds to them
	Cached         int        // chunks completed from remembered outputs, not run
	CacheVersion   string     // the workload version whose remembered outputs its creation looked up; "" when none
	SpeculateAfter float64    // a chunk leased this many times its job's median chunk time gets a backup; 0 for none
	Status         JobStatus
	Error          string // names the task that failed the job
	RootTaskID     string // the stitch task
	ChunkCount     int
	UploadID       string // the upload the chunks are cut from; empty for hosted chunks
	InputHeader    []byte // the header line every chunk of an upload repeats; nil when none
	IdempotencyKey string // empty when the client sent none
	RequestHash    string // sha256 of the creating request, to compare replays
	Result         []byte // the final CSV, once completed; only the store's JobResultRead reads it
	ResultBytes    int64  // the final CSV's size, read from the store (0 before it is stitched); never written
	ResultSHA256   string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     time.Time // zero until the job reaches a final status
	Version        int64
	// Creating is set while the job's tasks are being written in batches:
	// until it is cleared the job is hidden from clients (see
	// engine.CreateJob).
	Creating bool
}

// Bounds and defaults of job settings.
const (
	DefaultChunkRows    = 10000
	DefaultTopK         = 100
	DefaultScoreColumn  = "score"
	DefaultMaxAttempts  = 3
	DefaultLeaseSeconds = 120

	MinChunkRows, MaxChunkRows       = 1, 10_000_000
	MinTopK, MaxTopK                 = 1, 100_000
	MinMaxAttempts, MaxMaxAttempts   = 1, 100
	MinLeaseSeconds, MaxLeaseSeconds = 5, 3600
	MinPriority, MaxPriority         = -1000, 1000
	// A timeout of 0 is none; the longest is 7 days.
	MinTimeoutSeconds, MaxTimeoutSeconds = 0, 604_800
)

// Upload is a table a client streamed to the coordinator, stored normalized
// (LF line ends, fields quoted only when needed) as a blob.
type Upload struct {
	ID        string
	SHA256    string // of the body as sent
	Bytes     int64  // of the body as sent
	Rows      int64  // CSV records, the header included
	BlobKey   string // its name in the blob store: u- and the upload's local ID
	BlobBytes int64  // size of the normalized file
	Owner     string // the account that uploaded it
	CreatedAt time.Time
}

// LogLine is one line of a task's log.
type LogLine struct {
	ID      int64 // increases with every line appended to any task
	Attempt int
	Time    time.Time
	Line    string
}
