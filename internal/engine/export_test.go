package engine

// SetStitchPageHook makes e call fn after merging each page of a job's
// chunk outputs, to stop a stitch in its middle. Call it before Run.
func (e *Engine) SetStitchPageHook(fn func(jobID string, page int)) { e.stitchPageHook = fn }

// SetStitchPageBytes makes e's stitcher aim at n bytes of chunk outputs
// per page instead of the default, so that small tests can tell a bounded
// stitch from one that reads every output at once.
func (e *Engine) SetStitchPageBytes(n int) { e.pageBytes = n }
