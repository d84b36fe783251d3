package sink

import (
	"errors"

	"github.com/ClickHouse/clickhouse-go/v2"
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
	if f, ok := fixes[ex.Code]; ok {
		return f, true
	}
	return "see the server's message above; readsync spools rows until the server takes them", true
}

// The fixes readsync can name, by exception code.
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
)

var fixes = map[int32]string{
	164: fixRights,  // READONLY: a readonly profile
	497: fixRights,  // ACCESS_DENIED
	516: fixLogin,   // AUTHENTICATION_FAILED
	192: fixLogin,   // UNKNOWN_USER
	193: fixLogin,   // WRONG_PASSWORD
	62:  fixDialect, // SYNTAX_ERROR
	115: fixSetting, // UNKNOWN_SETTING
	46:  fixDialect, // UNKNOWN_FUNCTION
	47:  fixDialect, // UNKNOWN_IDENTIFIER
	48:  fixDialect, // NOT_IMPLEMENTED
	50:  fixDialect, // UNKNOWN_TYPE
	206: fixDialect, // ALIAS_REQUIRED
	344: fixDialect, // SUPPORT_IS_DISABLED
	16:  fixSchema,  // NO_SUCH_COLUMN_IN_TABLE
	60:  fixSchema,  // UNKNOWN_TABLE
	81:  fixSchema,  // UNKNOWN_DATABASE
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
