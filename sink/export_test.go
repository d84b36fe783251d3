package sink

// InsertBlockRows exposes insertBlockRows to the tests of package sink_test.
const InsertBlockRows = insertBlockRows
