package engine

// SetStitchPageHook makes e call fn after merging each page of a job's
// chunk outputs, to stop a stitch in its middle. Call it before Run.
func (e *Engine) SetStitchPageHook(fn func(jobID string, page int)) { e.stitchPageHook = fn }
