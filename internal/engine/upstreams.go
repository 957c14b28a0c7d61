package engine

import (
	"strconv"

	"github.com/scimesh/scimesh/internal/domain"
)

// MaxStitchUpstreams bounds the upstream IDs that Queue.Query lists for a
// job's stitch task. A job may have millions of chunks; 50,000 IDs of up
// to 66 bytes (a 32-character shard name) make at most about 3.3 MB, under
// the 4 MiB that gRPC clients accept by default.
const MaxStitchUpstreams = 50_000

// StitchUpstreams returns the IDs of job j's chunk tasks — the upstreams
// of its stitch task, the root of the job's tree — by chunk index: all of
// them, or the first limit when there are more and limit is above 0; and
// how many there are. It reads nothing: chunk task i of job J is named
// J-i when the job is created (CreateJob), and keeps that ID for good.
func StitchUpstreams(j *domain.Job, limit int) (ids []string, total int) {
	n := j.ChunkCount
	if limit > 0 {
		n = min(n, limit)
	}
	ids = make([]string, n)
	for i := range ids {
		ids[i] = j.ID + "-" + strconv.Itoa(i)
	}
	return ids, j.ChunkCount
}
