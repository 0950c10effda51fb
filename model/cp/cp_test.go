package cp_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/cp"
	"github.com/vdpp/vdpp/tensor"
)

// group returns the members of an in-process group of size.
func group(t *testing.T, size int) []cp.Comm {
	t.Helper()
	trs := comm.NewLocal(size, comm.Options{RecvTimeout: 30 * time.Second})
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	out := make([]cp.Comm, size)
	for i, tr := range trs {
		g, err := comm.NewGroup(tr, ranks)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = g
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    [][2]int
	}{
		{7, 3, [][2]int{{0, 3}, {3, 5}, {5, 7}}},
		{2, 3, [][2]int{{0, 1}, {1, 2}, {2, 2}}},
		{6, 2, [][2]int{{0, 3}, {3, 6}}},
	} {
		if got := cp.Split(tc.n, tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%d, %d) = %v, want %v", tc.n, tc.size, got, tc.want)
		}
	}
}

// TestReshardRoundTrip: three members with 1, 3 and 2 rows of a [2, A, 5, 3] tensor move
// to a split of the third axis (each member then holds every row of its range) and back.
func TestReshardRoundTrip(t *testing.T) {
	counts := []int{1, 3, 2}
	const r, b, in = 2, 5, 3
	total := 6
	whole := tensor.New(r, total, b, in)
	for i := range whole.Data {
		whole.Data[i] = float32(i)
	}
	bs := cp.Split(b, len(counts))
	comms := group(t, len(counts))
	back := make([]*tensor.Dense, len(counts))
	resharded := make([]*tensor.Dense, len(counts))
	errs := make([]error, len(counts))
	var wg sync.WaitGroup
	lo := 0
	for m, c := range counts {
		mine := tensor.New(r, c, b, in)
		for ri := range r {
			copy(mine.Data[ri*c*b*in:(ri+1)*c*b*in], whole.Data[(ri*total+lo)*b*in:])
		}
		lo += c
		wg.Go(func() {
			var got []int
			if resharded[m], got, errs[m] = cp.Reshard(context.Background(), comms[m], mine, bs); errs[m] != nil {
				return
			}
			if !slices.Equal(got, counts) {
				errs[m] = errors.New("counts differ")
				return
			}
			back[m], errs[m] = cp.Unshard(context.Background(), comms[m], resharded[m], bs, got)
			if errs[m] == nil && !slices.Equal(back[m].Data, mine.Data) {
				errs[m] = errors.New("round trip changed the values")
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for m, rg := range bs {
		got := resharded[m]
		for ri := range r {
			for a := range total {
				for bi := rg[0]; bi < rg[1]; bi++ {
					for k := range in {
						want := whole.Data[((ri*total+a)*b+bi)*in+k]
						if v := got.Data[((ri*total+a)*(rg[1]-rg[0])+bi-rg[0])*in+k]; v != want {
							t.Fatalf("member %d [%d %d %d %d] = %v, want %v", m, ri, a, bi, k, v, want)
						}
					}
				}
			}
		}
	}
}
