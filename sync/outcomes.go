package sync

import (
	"errors"
	"time"

	"github.com/readsync/readsync/apiclient"
	"github.com/readsync/readsync/sink"
)

// What became of each name a pass asked for, as the pass records it with
// its rows (sink.NameFailure, sink.NameSuccess): the stage that failed
// and the kind of cause, for name_failures and name_health.

// The kinds of a name's failure: name_failures.kind. They are a contract:
// the dashboard, the alerts and `readsync --failing-names` show them, and
// docs/operations.md says what each means and what to do.
const (
	// KindNotFound is the project details' failure envelope, the API's
	// one way of saying that no project is bound to the name
	// (apiclient.ErrNotRegistered).
	KindNotFound = "not_found"
	// KindRefused is another failure envelope: the API answered, and
	// said no.
	KindRefused = "refused"
	// KindHTTP4xx, KindHTTP429 and KindHTTP5xx are answers with that
	// HTTP status (name_failures.http_status holds it).
	KindHTTP4xx = "http_4xx"
	KindHTTP429 = "http_429"
	KindHTTP5xx = "http_5xx"
	// KindTimeout is no complete answer within the request timeout.
	KindTimeout = "timeout"
	// KindNetwork is a connection refused or reset, or a host not found.
	KindNetwork = "network"
	// KindDecode is an answer readsync could not decode: cut short,
	// malformed, not shaped like the spec, or over the size limit.
	KindDecode = "decode"
	// KindCircuitOpen is a name the pass did not ask for, or stopped
	// asking for, once the upstream as a whole stopped answering (the
	// breaker).
	KindCircuitOpen = "circuit_open"
	// KindCutOff is a name the end of its pass (its deadline, or a
	// shutdown) cut off before it was done.
	KindCutOff = "cut_off"
	// KindOther is anything else, such as rows that could not be staged
	// on disk.
	KindOther = "other"
)

// The stages of a name: the request that failed.
const (
	StageDetails = "details"
	StageList    = "list"
)

// stageError is a name's failure at one stage; its message is its cause's.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// passInfo is what each of a pass's outcome rows says of the pass.
type passInfo struct {
	runID      string
	snapshotAt time.Time
	shard      string
}

// failureRow is the name_failures row of the name nft, which failed with
// err in the pass p.
func failureRow(p passInfo, nft string, err error) sink.NameFailure {
	f := sink.NameFailure{RunID: p.runID, SnapshotAt: p.snapshotAt, Shard: p.shard, NFT: nft, Stage: StageDetails,
		Kind: FailureKind(err), Attempts: uint32(apiclient.Attempts(err)), Error: err.Error()}
	var st *stageError
	if errors.As(err, &st) {
		f.Stage = st.stage
	}
	var se *apiclient.StatusError
	if errors.As(err, &se) && f.Kind != KindCircuitOpen && f.Kind != KindCutOff {
		f.HTTPStatus = uint16(se.StatusCode)
	}
	var c *cutOffError
	if errors.As(err, &c) && !errors.As(err, new(*apiclient.AttemptsError)) {
		f.Attempts = 0 // asked for at most once, and not answered
	}
	return f
}

// FailureKind classes err, a name's failure in a pass, as one of the
// Kind constants.
func FailureKind(err error) string {
	var c *cutOffError
	if errors.As(err, &c) {
		if errors.As(c.cause, new(*OutageError)) {
			return KindCircuitOpen
		}
		return KindCutOff
	}
	if errors.Is(err, apiclient.ErrNotRegistered) {
		return KindNotFound
	}
	switch apiclient.Outcome(err) {
	case "envelope":
		return KindRefused
	case "http_4xx":
		return KindHTTP4xx
	case "http_429":
		return KindHTTP429
	case "http_5xx":
		return KindHTTP5xx
	case "timeout":
		return KindTimeout
	case "network":
		return KindNetwork
	case "invalid_body", "too_large":
		return KindDecode
	case "canceled":
		return KindCutOff
	}
	return KindOther
}
