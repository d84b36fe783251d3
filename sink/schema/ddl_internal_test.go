package schema

import (
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// Names from configuration are quoted so that no character ends the
// quotes: a backtick or a backslash in a cluster's name stays part of the
// name.
func TestQuoteIdent(t *testing.T) {
	d := DDL{chconn.NewNames("d", chconn.Topology{Cluster: "c`; DROP TABLE x; --\\"})}
	want := "CREATE DATABASE IF NOT EXISTS `d` ON CLUSTER `c\\`; DROP TABLE x; --\\\\`"
	if got := d.CreateDatabase(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
