// Package domain holds SciMesh's entities — jobs and tasks — their states, the
// rules that move a task from one state to the next, and the errors those rules
// raise. It is pure: no I/O, no clock, no randomness that is not passed in.
//
// A job is a tree: one stitch task at the root over the job's chunk tasks, the
// leaves. A chunk task goes pending → leased → completed | failed | cancelled,
// and back from leased to pending when its lease expires, its attempt runs
// past the job's timeout, or its worker reports a retryable failure, while
// attempts remain. The stitch task waits until every
// chunk completed, then becomes pending and is leased by a coordinator's
// stitcher, which merges the chunk outputs into the job's final CSV.
package domain
