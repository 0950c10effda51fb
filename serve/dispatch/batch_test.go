package dispatch

import (
	"testing"

	"github.com/vdpp/vdpp/pipeline"
)

func TestStagePlanAndStageOf(t *testing.T) {
	cases := []struct {
		steps, workers int
		want           []pipeline.Range
	}{
		{8, 4, []pipeline.Range{{Start: 0, End: 2}, {Start: 2, End: 4}, {Start: 4, End: 6}, {Start: 6, End: 8}}},
		{8, 3, []pipeline.Range{{Start: 0, End: 3}, {Start: 3, End: 6}, {Start: 6, End: 8}}},
		{2, 4, []pipeline.Range{{Start: 0, End: 1}, {Start: 1, End: 2}}}, // fewer steps than workers: one step per stage
		{5, 1, []pipeline.Range{{Start: 0, End: 5}}},
	}
	for _, c := range cases {
		plan, err := stagePlan(c.steps, c.workers)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan) != len(c.want) {
			t.Fatalf("%d steps on %d: %v", c.steps, c.workers, plan)
		}
		for i := range plan {
			if plan[i] != c.want[i] {
				t.Fatalf("%d steps on %d: %v, want %v", c.steps, c.workers, plan, c.want)
			}
		}
	}
	// A sample restarted mid-stage after a re-plan runs to the end of the stage holding it.
	plan, _ := stagePlan(9, 2) // [0,5) [5,9)
	for _, c := range []struct{ step, stage, end int }{{0, 0, 5}, {3, 0, 5}, {5, 1, 9}, {8, 1, 9}, {9, -1, -1}} {
		if st, end := stageOf(plan, c.step); st != c.stage || end != c.end {
			t.Fatalf("step %d: stage %d end %d, want %d %d", c.step, st, end, c.stage, c.end)
		}
	}
}

func TestBatchKeyCompatible(t *testing.T) {
	base := batchKey{steps: 8, start: 2, end: 4, shape: []int{1, 2, 4, 2, 2}, guidance: []float32{1, 2}}
	cases := []struct {
		name string
		k    batchKey
		want bool
	}{
		{"same", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{}}, true},
		{"other schedule", batchKey{9, 2, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{}}, false},
		{"other run spec", batchKey{8, 2, 4, `{"scheduler":"euler-a"}`, []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{}}, false},
		{"other step", batchKey{8, 3, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{}}, false},
		{"other end", batchKey{8, 2, 5, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{}}, false},
		{"other shape", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 3}, []float32{1, 2}, nil, pipeline.Cache{}}, false},
		{"other guidance", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2.5}, nil, pipeline.Cache{}}, false},
		{"unguided", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 2}, nil, nil, pipeline.Cache{}}, false},
		{"windowed", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, &pipeline.Windows{Size: 2, Overlap: 1, Blend: "cosine"}, pipeline.Cache{}}, false},
		{"cached", batchKey{8, 2, 4, "", []int{1, 2, 4, 2, 2}, []float32{1, 2}, nil, pipeline.Cache{Mode: "fbcache", Threshold: 0.1}}, false},
	}
	w := func(size, overlap int, blend string) *pipeline.Windows {
		return &pipeline.Windows{Size: size, Overlap: overlap, Blend: blend}
	}
	windowed := base
	windowed.windows = w(2, 1, "cosine")
	for _, o := range []struct {
		w    *pipeline.Windows
		want bool
	}{{w(2, 1, "cosine"), true}, {w(2, 0, "cosine"), false}, {w(3, 1, "cosine"), false}, {w(2, 1, "linear"), false}, {nil, false}} {
		k := base
		k.windows = o.w
		if got := windowed.compatible(k); got != o.want {
			t.Errorf("windows %+v with %+v: %v, want %v", windowed.windows, o.w, got, o.want)
		}
	}
	for _, c := range cases {
		if got := base.compatible(c.k); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
