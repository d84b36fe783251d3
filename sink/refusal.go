package sink

import (
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

// A refusal is an answer from a server that is up: it received the
// statement and will not run it, and it will answer the same until
// something changes on its side or in readsync's configuration (the
// server's version, the user's rights, the tables). It is not an outage:
// retrying does not help, and an operator must act. Rows are still
// spooled, so nothing is lost while they do.
//
// Refused tells the two apart. Only what the server answers with an
// exception can be a refusal, and of those, only what the same statement
// will meet again: an exception that says the server is overloaded, out of
// memory or waiting on ZooKeeper passes, and is treated like an outage.

// Refused reports whether err is a refusal, and what to do about it.
func Refused(err error) (fix string, ok bool) {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return "", false
	}
	if transient[ex.Code] {
		return "", false
	}
	if k, ok := known[ex.Code]; ok {
		return k.fix, true
	}
	return "see the server's message above; readsync spools rows until the server takes them", true
}

// RefusedForContent reports whether err is a refusal that may concern what
// the write held rather than the server: a refusal (see Refused) other
// than those every write meets whatever it holds (a login, a right, a
// statement, setting or database the server does not know), or a value
// the driver could not convert to its column's type (see Unconvertible).
// A value the server or the driver cannot convert, a table or column
// dropped or altered by hand, a view of the user's that throws on some
// rows: the server may take other writes meanwhile. The spool moves such
// an entry aside once it has proof of that (see package spool).
func RefusedForContent(err error) bool {
	if Unconvertible(err) {
		return true
	}
	if _, ok := Refused(err); !ok {
		return false
	}
	var ex *clickhouse.Exception
	errors.As(err, &ex)
	return !known[ex.Code].everyWrite
}

// Unconvertible reports whether err is clickhouse-go's refusal of a value
// it could not convert to its column's type while it appended a row to an
// INSERT's block: the client's counterpart of a server that cannot parse a
// value. The driver converts each value itself, to the type the server
// gave the column when the INSERT began, and fails before the row is sent
// with an error of its own, not an exception. It counts as a refusal for
// what the write holds (see RefusedForContent), not as an outage: the
// server is up (it sent the columns' types), the same rows meet the same
// error at every try, and other writes go on: rows whose values the
// column takes, and the other tables'.
//
// The driver wraps whatever a column's AppendRow returns in a
// *proto.BlockError whose Op is "AppendRow" and which names the column: a
// Go type the column does not take (*column.ColumnConverterError: a
// column whose type was changed by hand or by another release's
// migration, such as a String made a number) or a value its type cannot
// hold (*column.Error: an element an Enum lacks; plain errors: a string
// longer than a FixedString, a number beyond a Decimal or a big integer).
// Not: its Op "Append", a count of values other than the columns', which
// every write of a table meets (readsync's own mistake); nor an error of
// the connection or the server, which never comes wrapped so.
// A time beyond a DateTime's range is no such error: the driver wraps it
// around without a word (sink.Time clamps it before).
func Unconvertible(err error) bool {
	var be *proto.BlockError
	return errors.As(err, &be) && be.Op == "AppendRow"
}

// Fix says what an operator can do about err: a refusal's fix (see
// Refused), or that of a value the driver cannot convert (see
// Unconvertible); "" for anything else, such as an outage.
func Fix(err error) string {
	if Unconvertible(err) {
		return fixValue
	}
	fix, _ := Refused(err)
	return fix
}

// The fixes readsync can name.
const (
	fixRights = "the ClickHouse user of READSYNC_CLICKHOUSE_DSN lacks a right readsync needs (CREATE, ALTER, DROP VIEW, INSERT and SELECT " +
		"on its database): grant it, or apply the migrations once with `readsync --migrate` as a user who has them"
	// The server does not say which of the two it was: it answers an
	// unknown user as it does a wrong password (current releases send
	// AUTHENTICATION_FAILED for both), so as not to reveal which users exist.
	fixLogin = "check the user and the password in READSYNC_CLICKHOUSE_DSN: the server refused to log them in " +
		"(the user must exist there, and a password's reserved characters such as @, : or / must be percent-encoded in the DSN)"
	fixDialect = "this server does not accept a statement of readsync's: check that its release is one the README lists as tested, " +
		"and report the message with the server's version"
	fixSetting = "the server does not know a setting sent with readsync's statements: remove it from the query parameters of READSYNC_CLICKHOUSE_DSN " +
		"(readsync sends no other setting the server does not list in system.settings)"
	fixSchema = "readsync's tables are not as it left them (dropped, renamed or altered by hand?): `readsync --check` shows the schema's state"
	fixValue  = "the column the message names has a type that does not take readsync's value (altered by hand, or by another release's migration?): " +
		"give it back the type docs/clickhouse.md lists under Schema"
)

// refusal is what readsync knows of a refusal: what to do about it, and
// whether every write meets it, whatever rows it holds.
type refusal struct {
	fix        string
	everyWrite bool
}

// The refusals readsync can name, by exception code.
var known = map[int32]refusal{
	164: {fixRights, true},  // READONLY: a readonly profile
	497: {fixRights, true},  // ACCESS_DENIED
	291: {fixRights, true},  // DATABASE_ACCESS_DENIED
	516: {fixLogin, true},   // AUTHENTICATION_FAILED
	192: {fixLogin, true},   // UNKNOWN_USER
	193: {fixLogin, true},   // WRONG_PASSWORD
	62:  {fixDialect, true}, // SYNTAX_ERROR
	115: {fixSetting, true}, // UNKNOWN_SETTING
	452: {fixSetting, true}, // SETTING_CONSTRAINT_VIOLATION: a profile's constraint on a setting readsync sends
	46:  {fixDialect, true}, // UNKNOWN_FUNCTION
	47:  {fixDialect, true}, // UNKNOWN_IDENTIFIER
	48:  {fixDialect, true}, // NOT_IMPLEMENTED
	50:  {fixDialect, true}, // UNKNOWN_TYPE
	206: {fixDialect, true}, // ALIAS_REQUIRED
	344: {fixDialect, true}, // SUPPORT_IS_DISABLED
	81:  {fixSchema, true},  // UNKNOWN_DATABASE
	// A table or a column is one table's: writes to the others go on.
	16: {fixSchema, false}, // NO_SUCH_COLUMN_IN_TABLE
	60: {fixSchema, false}, // UNKNOWN_TABLE
}

// transient are the exceptions of a server that will likely take the same
// statement later.
var transient = map[int32]bool{
	3:   true, // UNEXPECTED_END_OF_FILE
	159: true, // TIMEOUT_EXCEEDED, an ON CLUSTER statement waiting for a host among them
	173: true, // CANNOT_ALLOCATE_MEMORY
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	225: true, // NO_ZOOKEEPER
	236: true, // ABORTED
	241: true, // MEMORY_LIMIT_EXCEEDED
	242: true, // TABLE_IS_READ_ONLY: a replica that lost ZooKeeper
	243: true, // NOT_ENOUGH_SPACE
	252: true, // TOO_MANY_PARTS
	279: true, // ALL_CONNECTION_TRIES_FAILED
	319: true, // UNKNOWN_STATUS_OF_INSERT
	394: true, // QUERY_WAS_CANCELLED
	999: true, // KEEPER_EXCEPTION
}

// Describe says what went wrong with ClickHouse, for an operator: when the
// server refused, that it did and what to do; otherwise the error as it is.
func Describe(err error) string {
	if fix, ok := Refused(err); ok {
		return fmt.Sprintf("ClickHouse refused: %v; to fix: %s", err, fix)
	}
	return err.Error()
}
