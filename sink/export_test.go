package sink

// InsertBlockRows exposes insertBlockRows to the tests of package sink_test.
const InsertBlockRows = insertBlockRows

// PreviousSchema exposes previousSchema, release 5013242's statements, to
// the tests of package sink_test.
var PreviousSchema = previousSchema
