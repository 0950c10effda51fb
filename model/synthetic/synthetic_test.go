package synthetic

import (
	"context"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

func input(rows int, uncond []bool) model.Input {
	x := tensor.New(rows, 2, 3, 2, 2)
	for i := range x.Data {
		x.Data[i] = float32(i%7) - 3
	}
	conds := make([]model.Conditioning, rows)
	for r := range conds {
		conds[r] = model.Conditioning{CondKey: {Shape: []int{3}, Data: []float32{1, 2, float32(r)}}}
	}
	return model.Input{Latents: x, Timestep: 0.5, Cond: conds, Uncond: uncond}
}

func TestPredictDeterministicAndCondSensitive(t *testing.T) {
	d, err := New(model.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := d.Predict(ctx, input(2, []bool{false, false}))
	b, _ := d.Predict(ctx, input(2, []bool{false, false}))
	if !tensor.BitEqual(a, b) {
		t.Fatal("same input gave different output")
	}
	u, _ := d.Predict(ctx, input(2, []bool{true, false}))
	per := a.Len() / 2
	if tensor.BitEqual(&tensor.Dense{Shape: []int{per}, Data: a.Data[:per]}, &tensor.Dense{Shape: []int{per}, Data: u.Data[:per]}) {
		t.Fatal("unconditional row equals conditional row")
	}
	// Row 1 is unaffected by row 0's flag: rows are independent.
	for i := per; i < 2*per; i++ {
		if a.Data[i] != u.Data[i] {
			t.Fatalf("row 1 changed with row 0's flag at %d", i)
		}
	}
	// Element check: x*a + 0.1*vec[c].
	in := input(1, []bool{false})
	out, _ := d.Predict(ctx, in)
	plane := 4
	at := float32(0.9) + float32(0.05)*in.Timestep
	for i, x := range in.Latents.Data {
		c := (i / plane) % 3
		want := float32(x*at) + float32(0.1)*in.Cond[0][CondKey].Data[c]
		if out.Data[i] != want {
			t.Fatalf("element %d: %v, want %v", i, out.Data[i], want)
		}
	}
}

func TestPredictCostPerRow(t *testing.T) {
	d, _ := New(model.Config{StepMS: 2})
	base := time.Unix(1000, 0)
	d.Now = func() time.Time { return base }
	var got time.Time
	d.SleepUntil = func(dl time.Time) { got = dl }
	d.Pace(base, 3)
	if want := base.Add(6 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got.Sub(base), want.Sub(base))
	}
}

func TestPreciseSleep(t *testing.T) {
	start := time.Now()
	preciseSleepUntil(start.Add(3 * time.Millisecond))
	if el := time.Since(start); el < 3*time.Millisecond {
		t.Fatalf("woke after %v, before the deadline", el)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(model.Config{Cost: "burn"}); err == nil {
		t.Fatal("unknown cost mode accepted")
	}
	if _, err := New(model.Config{StepMS: -1}); err == nil {
		t.Fatal("negative cost accepted")
	}
}

func TestBadConditioning(t *testing.T) {
	d, _ := New(model.Config{})
	in := input(1, []bool{false})
	in.Cond[0][CondKey] = &tensor.Dense{Shape: []int{2}, Data: []float32{1, 2}}
	if _, err := d.Predict(context.Background(), in); err == nil {
		t.Fatal("wrong-size conditioning accepted")
	}
}
