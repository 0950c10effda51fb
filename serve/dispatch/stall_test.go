package dispatch

import (
	"testing"
	"time"
)

func TestBatchWork(t *testing.T) {
	for _, c := range []struct {
		rows   int
		shape  []int
		guided bool
		want   float64
	}{
		{1, []int{1, 14, 4, 72, 128}, false, 14 * 4 * 72 * 128},
		{2, []int{1, 14, 4, 72, 128}, true, 4 * 14 * 4 * 72 * 128},
		{3, []int{2, 4, 2, 2}, false, 3 * 32}, // a per-sample shape without the batch dimension
		{0, nil, false, 0},
	} {
		if got := batchWork(c.rows, c.shape, c.guided); got != c.want {
			t.Errorf("batchWork(%d, %v, %v) = %v, want %v", c.rows, c.shape, c.guided, got, c.want)
		}
	}
}

func TestStallLimit(t *testing.T) {
	const base = time.Minute
	for _, c := range []struct {
		name          string
		base          time.Duration
		perUnit, work float64
		reruns        int
		want          time.Duration
	}{
		{"nothing measured", base, 0, 1e6, 0, base},
		{"small work", base, 1e-6, 1e3, 0, base},
		{"a 30 s step", base, 30e-6, 1e6, 0, 2 * time.Minute},
		{"a 60 s step", base, 1e-6, 60e6, 0, 4 * time.Minute},
		{"rerun after a stall", base, 0, 1e6, 1, 2 * base},
		{"three reruns", base, 1e-6, 60e6, 3, 32 * time.Minute},
		{"doublings bounded", base, 0, 1, 100, base << maxStallDoublings},
		{"disabled", 0, 1, 1e9, 3, 0},
		{"absurd estimate capped", base, 1, 1e12, 0, 24 * time.Hour},
	} {
		if got := stallLimit(c.base, c.perUnit, c.work, c.reruns); got != c.want {
			t.Errorf("%s: stallLimit = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStepRate(t *testing.T) {
	var r stepRate
	r.observe(1, 0) // no work: ignored
	if r.perUnit != 0 {
		t.Fatal(r.perUnit)
	}
	r.observe(2, 1000) // first observation taken as is
	if r.perUnit != 0.002 {
		t.Fatal(r.perUnit)
	}
	r.observe(0.1, 10) // 0.01 per unit: moves a fifth of the way
	if want := 0.002 + stepRateWeight*(0.01-0.002); r.perUnit != want {
		t.Fatalf("perUnit %v, want %v", r.perUnit, want)
	}
}
