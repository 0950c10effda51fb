package nn

import "testing"

func TestAttentionChunk(t *testing.T) {
	cases := []struct {
		name                         string
		budget                       int64
		batchHeads, sq, sk, elemSize int
		want                         int
	}{
		{"fits", 1 << 20, 4, 16, 16, 4, 0},
		{"exactly fits", 4 * 16 * 16 * 4, 4, 16, 16, 4, 0},
		{"one row over", 4*16*16*4 - 1, 4, 16, 16, 4, 15},
		{"svd-xt spatial on xla", 4 << 30, 2 * 25 * 5, 9216, 9216, 4, 466},
		{"svd-xt spatial bf16", 4 << 30, 2 * 25 * 5, 9216, 9216, 2, 932},
		{"a row over budget still makes progress", 16, 4, 16, 16, 4, 1},
		{"empty", 1, 0, 16, 16, 4, 0},
	}
	for _, tc := range cases {
		if got := attentionChunk(tc.budget, tc.batchHeads, tc.sq, tc.sk, tc.elemSize); got != tc.want {
			t.Errorf("%s: chunk = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestAttentionChunkForBackend(t *testing.T) {
	b, err := NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	// 256 MiB budget on simplego: 64 heads x 4096 keys x 4 bytes = 1 MiB a query row.
	if got := AttentionChunkFor(b, 64, 4096, 4096, 4); got != 256 {
		t.Errorf("simplego chunk = %d, want 256", got)
	}
	// nil backend (unknown) uses the XLA budget: 4 GiB / 1 MiB.
	if got := AttentionChunkFor(nil, 64, 8192, 4096, 4); got != 4096 {
		t.Errorf("xla chunk = %d, want 4096", got)
	}
}
