package tensor

import (
	"reflect"
	"slices"
	"testing"
)

func TestChunks(t *testing.T) {
	for _, tc := range []struct {
		n, parts, chunk int
		want            [][2]int
	}{
		{n: 14, parts: 2, want: [][2]int{{0, 7}, {7, 14}}},
		{n: 5, parts: 2, want: [][2]int{{0, 3}, {3, 5}}},
		{n: 1, parts: 4, want: [][2]int{{0, 1}}},
		{n: 14, chunk: 4, want: [][2]int{{0, 4}, {4, 8}, {8, 12}, {12, 14}}},
		{n: 3, parts: 0, want: [][2]int{{0, 3}}},
		{n: 0, parts: 2, want: nil},
	} {
		if got := Chunks(tc.n, tc.parts, tc.chunk); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Chunks(%d, %d, %d) = %v, want %v", tc.n, tc.parts, tc.chunk, got, tc.want)
		}
	}
}

func TestRowsAndConcat(t *testing.T) {
	x, _ := FromData([]float32{0, 1, 2, 3, 4, 5}, 3, 2)
	a, b := x.Rows(0, 1), x.Rows(1, 3)
	if !reflect.DeepEqual(a.Shape, []int{1, 2}) || !reflect.DeepEqual(b.Data, []float32{2, 3, 4, 5}) {
		t.Fatalf("rows: %v %v", a, b.Data)
	}
	y, err := ConcatRows([]*Dense{a, b})
	if err != nil || !BitEqual(x, y) {
		t.Fatalf("concat = %v, %v; want %v", y, err, x)
	}
	if _, err := ConcatRows([]*Dense{a, New(1, 3)}); err == nil {
		t.Fatal("concat of [1 2] and [1 3] did not fail")
	}
}

func TestGatherRows(t *testing.T) {
	x := &Dense{Shape: []int{3, 2}, Data: []float32{0, 1, 10, 11, 20, 21}}
	got := x.GatherRows([]int{2, 0, 2})
	if want := []float32{20, 21, 0, 1, 20, 21}; len(got.Shape) != 2 || got.Shape[0] != 3 || got.Shape[1] != 2 || !slices.Equal(got.Data, want) {
		t.Fatalf("GatherRows = %v %v, want [3 2] %v", got.Shape, got.Data, want)
	}
	got.Data[0] = -1
	if x.Data[4] != 20 {
		t.Fatal("GatherRows shares its source's data")
	}
	if got := x.GatherRows(nil); got.Shape[0] != 0 || len(got.Data) != 0 {
		t.Fatalf("no rows: %v", got.Shape)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("row 3 of 3 did not panic")
		}
	}()
	x.GatherRows([]int{3})
}
