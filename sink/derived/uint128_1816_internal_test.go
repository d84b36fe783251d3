package derived

import (
	"math"
	"testing"
)

// A sum of versions past 64 bits carries into the high word.
func TestUint128Carries(t *testing.T) {
	var u uint128
	u.add(math.MaxUint64)
	u.add(2)
	if u != (uint128{hi: 1, lo: 1}) {
		t.Errorf("MaxUint64 + 2 = %+v, want {hi:1 lo:1}", u)
	}
}
