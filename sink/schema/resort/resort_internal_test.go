package resort

import "testing"

// What a step of the move does next, by what it finds: the table's key,
// which of the three tables exist, and the phases recorded.
func TestResortStateDone(t *testing.T) {
	const old = "project_id, message_id, snapshot_at"
	for _, tt := range []struct {
		name string
		s    resortState
		done bool
	}{
		{"a database created with the key", resortState{key: resortKey, snapshots: true}, true},
		{"a database of an earlier release", resortState{key: old, snapshots: true}, false},
		{"set up, copying", resortState{key: old, snapshots: true, resorted: true, setupAt: 1}, false},
		{"killed between the two renames of a swap", resortState{resorted: true, presort: true, setupAt: 1, swapAt: 2}, false},
		{"swapped, the rows of the swap not yet copied", resortState{key: resortKey, snapshots: true, presort: true, setupAt: 1, swapAt: 2}, false},
		{"moved", resortState{key: resortKey, snapshots: true, presort: true, setupAt: 1, swapAt: 2, swapped: 3}, true},
		{"no table yet", resortState{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.done(); got != tt.done {
				t.Errorf("done() = %v, want %v for %+v", got, tt.done, tt.s)
			}
		})
	}
}
