package generate

import "testing"

// The collector's allowance is about heldHeadroom bytes once the weights are large, and
// the default below that.
func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		w    int64
		want int
	}{
		{0, -1},
		{100 << 20, -1},    // small weights: the default allows less than heldHeadroom
		{heldHeadroom, -1}, // the default allows exactly heldHeadroom
		{2 << 30, 25},      // 2 GiB: 512 MiB is 25%
		{5 << 30, 10},      // 5 GiB: 10%
		{57 << 30, 10},     // never under 10%
		{1 << 30, 50},      // 1 GiB
	} {
		if got := gcPercent(c.w); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.w>>20, got, c.want)
		}
	}
}
