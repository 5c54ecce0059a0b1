package membership

import "time"

// OpBatch is a batch's change: the changes of its writes, in order, under
// one revision (Change.Changes).
const OpBatch Op = "batch"

// DefaultMaxBatchWrites is the default limit on the writes of one batch.
const DefaultMaxBatchWrites = 1000

// Batch is writes to many groups applied all or nothing, as one change with
// one revision: no reader ever sees part of it. Each write is an OpAdd,
// OpRemove, OpReplace or OpDeleteGroup, applied in order, each after the
// ones before it. Every write's precondition is checked against the state
// before the batch; if one does not hold, nothing is applied and the error
// is PreconditionFailed naming the write. A user a batch leaves in no group
// is forgotten, nickname included, once the whole batch is applied: a user
// moved from one group to another in one batch keeps its nickname.
type Batch struct {
	Writes []Write
	// Actor and Time are the batch's, as a Write's are: its writes' own
	// are not used.
	Actor UID
	Time  time.Time
}

// BatchResult is what a batch reports: each write's Result, in order, all
// at the batch's revision (or, when the batch changed nothing, the latest),
// and that revision.
type BatchResult struct {
	Results  []Result
	Revision Revision
}
