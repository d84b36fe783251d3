package derived

import "math/bits"

// uint128 is an unsigned 128-bit sum, which the gains key's sums of
// versions need (versions are nanoseconds). It exists because 18.16 has no
// UInt128 to sum them into on the server, and the gains are computed in Go
// for want of window functions (gains.go); a current release would sum
// them with sum(toUInt128(version)) where it computes the gains.
type uint128 struct{ hi, lo uint64 }

// add adds x, carrying into hi.
func (u *uint128) add(x uint64) {
	var carry uint64
	u.lo, carry = bits.Add64(u.lo, x, 0)
	u.hi += carry
}
