package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// naiveConv is the float64 reference.
func naiveConv(x, w, bias []float32, s ConvShape) []float64 {
	o := s.Out()
	out := make([]float64, s.N*s.O*o[0]*o[1]*o[2])
	for n := range s.N {
		for oc := range s.O {
			for a := range o[0] {
				for b := range o[1] {
					for c := range o[2] {
						var acc float64
						for ic := range s.C {
							for k0 := range s.K[0] {
								for k1 := range s.K[1] {
									for k2 := range s.K[2] {
										i0, i1, i2 := a*s.Stride+k0-s.Pads[0][0], b*s.Stride+k1-s.Pads[1][0], c*s.Stride+k2-s.Pads[2][0]
										if i0 < 0 || i1 < 0 || i2 < 0 || i0 >= s.In[0] || i1 >= s.In[1] || i2 >= s.In[2] {
											continue
										}
										xv := x[(((n*s.C+ic)*s.In[0]+i0)*s.In[1]+i1)*s.In[2]+i2]
										wv := w[(((oc*s.C+ic)*s.K[0]+k0)*s.K[1]+k1)*s.K[2]+k2]
										acc += float64(xv) * float64(wv)
									}
								}
							}
						}
						if bias != nil {
							acc += float64(bias[oc])
						}
						out[(((n*s.O+oc)*o[0]+a)*o[1]+b)*o[2]+c] = acc
					}
				}
			}
		}
	}
	return out
}

func TestConvMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []ConvShape{
		{N: 2, C: 3, O: 5, In: [3]int{1, 7, 9}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
		{N: 1, C: 4, O: 9, In: [3]int{1, 8, 8}, K: [3]int{1, 3, 3}, Stride: 2, Pads: [3][2]int{{}, {0, 1}, {0, 1}}},
		{N: 2, C: 6, O: 3, In: [3]int{5, 3, 4}, K: [3]int{3, 1, 1}, Stride: 1, Pads: [3][2]int{{1, 1}, {}, {}}},
		{N: 1, C: 2, O: 4, In: [3]int{4, 6, 5}, K: [3]int{3, 3, 3}, Stride: 1, Pads: [3][2]int{{0, 0}, {1, 1}, {1, 1}}},
		{N: 3, C: 7, O: 33, In: [3]int{1, 5, 70}, K: [3]int{1, 1, 1}, Stride: 1},
		{N: 1, C: 2, O: 2, In: [3]int{1, 2, 3}, K: [3]int{1, 2, 2}, Stride: 1, Pads: [3][2]int{{}, {2, 2}, {2, 2}}},
		// Output rows a whole number of panels wide (32 and 64 columns).
		{N: 3, C: 5, O: 11, In: [3]int{1, 5, 64}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
		{N: 2, C: 3, O: 4, In: [3]int{3, 4, 32}, K: [3]int{3, 3, 3}, Stride: 1, Pads: [3][2]int{{0, 0}, {1, 1}, {1, 1}}},
	} {
		t.Run(fmt.Sprintf("%+v", s), func(t *testing.T) {
			o := s.Out()
			x := randSlice(r, s.N*s.C*s.In[0]*s.In[1]*s.In[2], 1)
			w := randSlice(r, s.O*s.C*s.K[0]*s.K[1]*s.K[2], 1)
			bias := randSlice(r, s.O, 1)
			out := make([]float32, s.N*s.O*o[0]*o[1]*o[2])
			for i := range out {
				out[i] = float32(math.NaN())
			}
			Conv(out, x, w, bias, s)
			closeTo(t, "conv", out, naiveConv(x, w, bias, s), 1e-5)
			Conv(out, x, w, nil, s)
			closeTo(t, "conv without bias", out, naiveConv(x, w, nil, s), 1e-5)
		})
	}
}

func TestConvSplitInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, width := range []int{20, 64} {
		convSplitInvariant(t, r, width)
	}
}

func convSplitInvariant(t *testing.T, r *rand.Rand, width int) {
	s := ConvShape{N: 3, C: 16, O: 32, In: [3]int{1, 20, width}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}}
	plane := 20 * width
	x, w, b := randSlice(r, 3*16*plane, 1), randSlice(r, 32*16*9, 1), randSlice(r, 32, 1)
	many := make([]float32, 3*32*plane)
	Conv(many, x, w, b, s)
	old := runtime.GOMAXPROCS(1)
	one := make([]float32, len(many))
	Conv(one, x, w, b, s)
	runtime.GOMAXPROCS(old)
	single := s
	single.N = 1
	row := make([]float32, 32*plane)
	Conv(row, x[16*plane:], w, b, single)
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(many[i]) {
			t.Fatalf("element %d: %g with one goroutine, %g with %d", i, one[i], many[i], old)
		}
	}
	for i := range row {
		if math.Float32bits(row[i]) != math.Float32bits(many[32*plane+i]) {
			t.Fatalf("batch row 1 element %d: %g alone, %g in the batch", i, row[i], many[32*plane+i])
		}
	}
}

func BenchmarkConv(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []ConvShape{
		{N: 14, C: 32, O: 32, In: [3]int{1, 8, 8}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
		{N: 6, C: 320, O: 320, In: [3]int{1, 16, 16}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
		{N: 7, C: 32, O: 32, In: [3]int{1, 64, 64}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
	} {
		o := s.Out()
		x := randSlice(r, s.N*s.C*s.In[0]*s.In[1]*s.In[2], 1)
		w := randSlice(r, s.O*s.C*9, 1)
		out := make([]float32, s.N*s.O*o[0]*o[1]*o[2])
		b.Run(fmt.Sprintf("N%d_C%d_%dx%d", s.N, s.C, s.In[1], s.In[2]), func(b *testing.B) {
			for b.Loop() {
				Conv(out, x, w, nil, s)
			}
			flops := 2 * float64(s.N*s.O*s.C*9*o[1]*o[2])
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestConvMatrix checks that a convolution whose weight is widened a group of output
// channels at a time gives the bits of Conv, with several groups, for the stride-1 and the
// gathering paths.
func TestConvMatrix(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []ConvShape{
		{N: 2, C: 64, O: 230, In: [3]int{1, 6, 7}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
		{N: 1, C: 64, O: 230, In: [3]int{1, 8, 8}, K: [3]int{1, 3, 3}, Stride: 2, Pads: [3][2]int{{}, {0, 1}, {0, 1}}},
		{N: 1, C: 3, O: 5, In: [3]int{2, 4, 32}, K: [3]int{1, 3, 3}, Stride: 1, Pads: [3][2]int{{}, {1, 1}, {1, 1}}},
	} {
		k := s.C * s.K[0] * s.K[1] * s.K[2]
		o := s.Out()
		x := randSlice(r, s.N*s.C*s.In[0]*s.In[1]*s.In[2], 1)
		w := randSlice(r, s.O*k, 1)
		bias := randSlice(r, s.O, 1)
		want := make([]float32, s.N*s.O*o[0]*o[1]*o[2])
		Conv(want, x, w, bias, s)
		got := make([]float32, len(want))
		ConvMatrix(got, x, f32Rows{w, k}, bias, s)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: element %d = %g, Conv %g", s, i, got[i], want[i])
			}
		}
	}
}
