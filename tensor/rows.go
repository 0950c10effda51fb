package tensor

import "fmt"

// Rows returns rows [start, end) of t's first axis as a view sharing t's data.
func (t *Dense) Rows(start, end int) *Dense {
	if len(t.Shape) == 0 || start < 0 || end > t.Shape[0] || start > end {
		panic(fmt.Sprintf("tensor: rows [%d, %d) of %v", start, end, t.Shape))
	}
	per := NumElements(t.Shape[1:])
	shape := append([]int{end - start}, t.Shape[1:]...)
	return &Dense{Shape: shape, Data: t.Data[start*per : end*per]}
}

// GatherRows copies rows idx of t's first axis, in that order, into a new tensor.
func (t *Dense) GatherRows(idx []int) *Dense {
	if len(t.Shape) == 0 {
		panic(fmt.Sprintf("tensor: rows %v of a scalar", idx))
	}
	per := NumElements(t.Shape[1:])
	out := New(append([]int{len(idx)}, t.Shape[1:]...)...)
	for j, r := range idx {
		if r < 0 || r >= t.Shape[0] {
			panic(fmt.Sprintf("tensor: row %d of %v", r, t.Shape))
		}
		copy(out.Data[j*per:(j+1)*per], t.Data[r*per:(r+1)*per])
	}
	return out
}

// ConcatRows joins tensors along the first axis; all must have the same trailing shape.
func ConcatRows(parts []*Dense) (*Dense, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("tensor: concat of no tensors")
	}
	rows := 0
	for i, p := range parts {
		if len(p.Shape) == 0 || len(p.Shape) != len(parts[0].Shape) || NumElements(p.Shape[1:]) != NumElements(parts[0].Shape[1:]) {
			return nil, fmt.Errorf("tensor: concat: part %d is %v, part 0 is %v", i, p.Shape, parts[0].Shape)
		}
		rows += p.Shape[0]
	}
	out := New(append([]int{rows}, parts[0].Shape[1:]...)...)
	off := 0
	for _, p := range parts {
		off += copy(out.Data[off:], p.Data)
	}
	return out, nil
}

// Chunks splits n rows into at most parts contiguous [start, end) ranges of near-equal size
// (the first ones one longer), or of size chunk when chunk > 0 (the last one shorter).
func Chunks(n, parts, chunk int) [][2]int {
	if n <= 0 {
		return nil
	}
	if chunk <= 0 {
		parts = max(1, min(parts, n))
		var out [][2]int
		start := 0
		for i := 0; i < parts; i++ {
			size := n / parts
			if i < n%parts {
				size++
			}
			out = append(out, [2]int{start, start + size})
			start += size
		}
		return out
	}
	var out [][2]int
	for start := 0; start < n; start += chunk {
		out = append(out, [2]int{start, min(start+chunk, n)})
	}
	return out
}
