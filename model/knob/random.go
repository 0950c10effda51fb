package knob

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Random draws a value of knob name in its range from r: with probability 1/3 an edge of
// the range (its bounds and their neighbours), else a value spread over the range (small
// values more often, as a log scale draws them). A String is one of its Choices, a Steps
// list a few ascending steps. What a property test of a surface draws jobs from.
func (k Knob) Random(r *rand.Rand) any {
	switch k.Kind {
	case Int:
		lo, hi := int64(k.Min), int64(math.MaxInt64)
		if k.Max < math.MaxInt64 {
			hi = int64(k.Max)
		}
		if !k.bounded() {
			lo, hi = -1000, 1000
		}
		if r.IntN(3) == 0 {
			edges := []int64{lo, hi, min(lo+1, hi), max(hi-1, lo)}
			return edges[r.IntN(len(edges))]
		}
		span := uint64(hi - lo)
		// A log-uniform width: small and large values both come up.
		w := uint64(1) << r.UintN(uint(min(63, bitsLen(span)+1)))
		return lo + int64(r.Uint64N(min(w, span)+1))
	case Float:
		lo, hi := k.Min, k.Max
		if !k.bounded() {
			lo, hi = -1000, 1000
		}
		if r.IntN(3) == 0 {
			edges := []float64{hi, math.Nextafter(hi, lo)}
			if !k.MinOpen {
				edges = append(edges, lo)
			}
			edges = append(edges, math.Nextafter(lo, hi))
			return edges[r.IntN(len(edges))]
		}
		v := lo + (hi-lo)*math.Pow(r.Float64(), 3)
		if k.MinOpen && v <= lo {
			v = math.Nextafter(lo, hi)
		}
		return v
	case String:
		if len(k.Choices) == 0 {
			return fmt.Sprintf("v%d", r.IntN(100))
		}
		return k.Choices[r.IntN(len(k.Choices))]
	case Bool:
		return r.IntN(2) == 1
	case Steps:
		top := int(math.Min(k.Max, k.Min+60))
		var out []int
		for s := int(k.Min); s <= top; s++ {
			if r.IntN(4) == 0 {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			out = []int{int(k.Min)}
		}
		return slices.Clip(out)
	}
	return nil
}

// bitsLen is the bit length of v.
func bitsLen(v uint64) int {
	n := 0
	for v != 0 {
		v >>= 1
		n++
	}
	return n
}

// Set stores v (a value of the knob's kind: int64 or int, float64, string, bool, []int) as
// knob name of *params, checked against its range, and marks it given.
func (t Table) Set(params any, given Given, name string, v any) error {
	k, ok := t.Lookup(name)
	if !ok {
		return t.Errorf("", "unknown parameter %q", name)
	}
	if n, ok := v.(int); ok {
		v = int64(n)
	}
	switch v.(type) {
	case int64:
		if k.Kind != Int {
			return fmt.Errorf("knob: %s is a %s, not an int", name, k.Kind)
		}
	case float64:
		if k.Kind != Float {
			return fmt.Errorf("knob: %s is a %s, not a float", name, k.Kind)
		}
	}
	if err := t.checkValue(k, v); err != nil {
		return err
	}
	f, ferr := field(params, k)
	if ferr != nil {
		return ferr
	}
	set(f, v)
	if given != nil {
		given[name] = true
	}
	return nil
}
