package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// index returns the flat index of coordinates c in dims, broadcasting size-1 axes.
func index(c, dims []int) int {
	off := 0
	for i, d := range dims {
		k := c[i]
		if d == 1 {
			k = 0
		}
		off = off*d + k
	}
	return off
}

// coords returns the coordinates of flat index i in dims.
func coords(i int, dims []int) []int {
	c := make([]int, len(dims))
	for k := len(dims) - 1; k >= 0; k-- {
		c[k] = i % dims[k]
		i /= dims[k]
	}
	return c
}

func size(d []int) int {
	n := 1
	for _, v := range d {
		n *= v
	}
	return n
}

func TestBinaryBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ out, a, b []int }{
		{[]int{3, 4}, []int{3, 4}, []int{3, 4}},
		{[]int{2, 8, 5, 5}, []int{2, 8, 5, 5}, []int{2, 8, 1, 1}},
		{[]int{2, 8, 5, 5}, []int{1, 1, 1, 1}, []int{2, 8, 5, 5}},
		{[]int{4, 3, 200}, []int{4, 1, 200}, []int{1, 3, 1}},
		{[]int{1, 1}, []int{1, 1}, []int{1, 1}},
		{[]int{300, 70}, []int{300, 1}, []int{1, 70}},
		{[]int{2, 3, 4, 5}, []int{2, 1, 4, 1}, []int{1, 3, 1, 5}},
	} {
		a, b := randSlice(r, size(tc.a), 1), randSlice(r, size(tc.b), 1)
		for op := Add; op <= Min; op++ {
			t.Run(fmt.Sprint(tc.out, tc.a, tc.b, op), func(t *testing.T) {
				out := make([]float32, size(tc.out))
				Binary(op, out, a, b, tc.out, tc.a, tc.b)
				for i := range out {
					c := coords(i, tc.out)
					x, y := a[index(c, tc.a)], b[index(c, tc.b)]
					want := map[BinaryOp]float32{Add: x + y, Sub: x - y, Mul: x * y, Div: x / y,
						Max: float32(math.Max(float64(x), float64(y))), Min: float32(math.Min(float64(x), float64(y)))}[op]
					if out[i] != want {
						t.Fatalf("element %v: %g, want %g", c, out[i], want)
					}
				}
			})
		}
	}
}

func TestTranspose(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ dims, perm []int }{
		{[]int{3, 4}, []int{1, 0}},
		{[]int{2, 14, 32, 8, 8}, []int{0, 2, 1, 3, 4}},
		{[]int{2, 32, 64}, []int{0, 2, 1}},
		{[]int{5, 1, 37, 19}, []int{2, 0, 3, 1}},
		{[]int{2, 3, 4, 5, 6}, []int{4, 3, 2, 1, 0}},
		{[]int{7, 1}, []int{1, 0}},
		{[]int{40, 33, 3}, []int{1, 0, 2}},
	} {
		in := randSlice(r, size(tc.dims), 1)
		out := make([]float32, len(in))
		Transpose(out, in, tc.dims, tc.perm)
		od := make([]int, len(tc.dims))
		for i, p := range tc.perm {
			od[i] = tc.dims[p]
		}
		for i := range out {
			c := coords(i, od)
			ic := make([]int, len(c))
			for k, p := range tc.perm {
				ic[p] = c[k]
			}
			if want := in[index(ic, tc.dims)]; out[i] != want {
				t.Fatalf("%v %v: element %v = %g, want %g", tc.dims, tc.perm, c, out[i], want)
			}
		}
	}
}

func TestUnary(t *testing.T) {
	in := randSlice(rand.New(rand.NewPCG(5, 6)), 100000, 3)
	for op, f := range map[UnaryOp]func(float32) float32{ExpOp: Exp, SigmoidOp: Sigmoid, ErfOp: Erf, TanhOp: Tanh} {
		out := make([]float32, len(in))
		Unary(op, out, in)
		for i, v := range in {
			if math.Float32bits(out[i]) != math.Float32bits(f(v)) {
				t.Fatalf("op %d at %g: %g, want %g", op, v, out[i], f(v))
			}
		}
	}
}
