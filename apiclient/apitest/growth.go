package apitest

import "slices"

// grow applies one step of read growth to e and returns the read counts to
// serve, or nil when growth is off.
func (s *Server) grow(e *entry) []int64 {
	if s.growth <= 0 {
		return nil
	}
	msgs := e.p.Messages
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reads == nil {
		e.reads = make([]int64, len(msgs))
		for i := range msgs {
			e.reads[i] = msgs[i].ReadCount
		}
	}
	e.passes++
	for i := range msgs {
		e.reads[i] = grownRead(e.reads[i], msgs[i].Total, growthStep(msgs[i].ID, e.passes, s.growth))
	}
	// Handing out a copy lets the response be written without holding the
	// lock while another request grows the counts further.
	return slices.Clone(e.reads)
}

// grownRead returns read raised by inc but not past total; a read already
// at or beyond total is left alone.
func grownRead(read, total, inc int64) int64 {
	if read >= total {
		return read
	}
	// room is positive unless total-read overflowed, in which case read is
	// so negative that read+inc cannot overflow.
	if room := total - read; room > 0 && inc >= room {
		return total
	}
	return read + inc
}

// growthStep is the deterministic increase, in [0, step], of the message
// with the given id on the given list request of its project.
func growthStep(id int64, pass uint64, step int64) int64 {
	h := splitmix64(uint64(id) ^ splitmix64(pass))
	return int64(h % (uint64(step) + 1))
}

// splitmix64 is the SplitMix64 finaliser, a cheap well-mixed hash of x.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
