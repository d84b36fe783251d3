package schema

import (
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// The shape check catches the JOIN the first two releases wrote.
func TestShapeCheckCatchesTheUnaliasedJoin(t *testing.T) {
	old := `SELECT a FROM (SELECT 1 AS k, 2 AS a) ANY LEFT JOIN (SELECT 1 AS k) USING (k)`
	if !shapesOneServerRefuses[0].re.MatchString(old) {
		t.Error("the unaliased JOIN passes the shape check")
	}
	for _, v := range rollupViews(DDL{Names: chconn.NewNames("d", chconn.Topology{})}) {
		for _, s := range shapesOneServerRefuses {
			if s.re.MatchString(v.query) {
				t.Errorf("view %s: %s", v.name, s.reason)
			}
		}
	}
}
