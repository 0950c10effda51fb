package train

import "fmt"

// A step's gradient is the sum of its microbatches' gradients 0..m-1 taken along one fixed
// binary tree (sumTree): a node [lo, hi) of more than one microbatch is the sum of its halves
// [lo, mid) + [mid, hi), mid = lo + ⌈(hi-lo)/2⌉, the left half's value plus the right's, element
// by element in float32. Each rank evaluates the nodes that lie wholly in its share of the
// microbatches (ownSpans) and the ranks exchange them; every rank then finishes the tree
// above them. Floating-point addition is not associative, but the tree is a function of m
// alone, so every rank, for any number of ranks, computes the same bits (and so does one
// process that accumulates all m microbatches itself).

// span is the microbatches [lo, hi) of a step: a node of its summation tree.
type span struct{ lo, hi int }

func (s span) String() string { return fmt.Sprintf("[%d, %d)", s.lo, s.hi) }

// halves splits a node of more than one microbatch into its children.
func (s span) halves() (span, span) {
	mid := s.lo + (s.hi-s.lo+1)/2
	return span{s.lo, mid}, span{mid, s.hi}
}

// ownSpans returns, in order, the largest nodes of the tree over [0, m) that lie inside
// [lo, hi): together they cover [lo, hi) exactly.
func ownSpans(lo, hi, m int) []span {
	var out []span
	var walk func(s span)
	walk = func(s span) {
		switch {
		case s.hi <= lo || s.lo >= hi:
		case s.lo >= lo && s.hi <= hi:
			out = append(out, s)
		default:
			l, r := s.halves()
			walk(l)
			walk(r)
		}
	}
	if lo < hi {
		walk(span{0, m})
	}
	return out
}

// sumSpan evaluates node s from its leaves: leaf(i) is microbatch i's vector (called in
// order, each once; sumSpan may add into what it returns). At most one vector per tree level
// is alive at a time.
func sumSpan(s span, leaf func(i int) ([]float32, error)) ([]float32, error) {
	if s.hi-s.lo == 1 {
		return leaf(s.lo)
	}
	l, r := s.halves()
	a, err := sumSpan(l, leaf)
	if err != nil {
		return nil, err
	}
	b, err := sumSpan(r, leaf)
	if err != nil {
		return nil, err
	}
	return addInto(a, b)
}

// sumTree finishes the tree over [0, m) from known nodes that cover every microbatch once
// (the ranks' ownSpans). It may add into the known vectors.
func sumTree(m int, known map[span][]float32) ([]float32, error) {
	var eval func(s span) ([]float32, error)
	eval = func(s span) ([]float32, error) {
		if v, ok := known[s]; ok {
			return v, nil
		}
		if s.hi-s.lo <= 1 {
			return nil, fmt.Errorf("train: gradient sum: microbatch %s is missing", s)
		}
		l, r := s.halves()
		a, err := eval(l)
		if err != nil {
			return nil, err
		}
		b, err := eval(r)
		if err != nil {
			return nil, err
		}
		return addInto(a, b)
	}
	return eval(span{0, m})
}

// addInto adds b to a element-wise and returns a.
func addInto(a, b []float32) ([]float32, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("train: gradient sum: vectors of %d and %d values", len(a), len(b))
	}
	for i, v := range b {
		a[i] += v
	}
	return a, nil
}
