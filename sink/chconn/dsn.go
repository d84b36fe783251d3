package chconn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// DSN is a parsed READSYNC_CLICKHOUSE_DSN.
type DSN struct {
	opts     *clickhouse.Options
	database string
}

// Password is the DSN's password, so that callers can keep it out of what
// they print.
func (d DSN) Password() string { return d.opts.Auth.Password }

// ParseDSN parses a native-protocol DSN such as
// clickhouse://user:pass@host:9000/database?dial_timeout=5s. Errors never
// contain the password.
func ParseDSN(dsn string) (DSN, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return DSN{}, errors.New("not a URL: expected clickhouse://user:password@host:9000/database")
	}
	switch strings.ToLower(scheme) {
	case "clickhouse", "tcp":
	default:
		return DSN{}, fmt.Errorf("scheme %q: readsync speaks the native protocol, use clickhouse://host:9000/database", scheme)
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return DSN{}, redactSecret(err, passwordOf(dsn))
	}
	db := opts.Auth.Database
	if db == "" {
		db = "default"
	}
	if strings.ContainsAny(db, "`\\/") {
		return DSN{}, fmt.Errorf("database name %q has a character readsync does not quote", db)
	}
	return DSN{opts: opts, database: db}, nil
}

// passwordOf extracts a password from a DSN that may not parse, so that it
// can be removed from error text.
func passwordOf(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "://")
	userinfo, _, ok := strings.Cut(rest, "@")
	if !ok {
		return ""
	}
	_, pass, _ := strings.Cut(userinfo, ":")
	if p, err := url.PathUnescape(pass); err == nil {
		return p
	}
	return pass
}
