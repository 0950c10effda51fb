package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestUpdateVectorsMatchesStep runs the step-indexed form (dst aliasing x, state vectors
// copied between steps and each step replayed from the same vectors) against Step.
func TestUpdateVectorsMatchesStep(t *testing.T) {
	order3 := wanUniPCConfig()
	order3.SolverOrder = 3
	order3.LowerOrderFinal = false
	order3.FinalSigmasType = "sigma_min"
	eps := DefaultUniPCConfig()
	eps.DisableCorrector = []int{1}
	for name, cfg := range map[string]UniPCConfig{"wan": wanUniPCConfig(), "order3": order3, "eps": eps} {
		t.Run(name, func(t *testing.T) {
			u, err := NewUniPC(cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			const n = 12
			x0 := randomVec(r, n)
			mos := make([][]float32, u.NumSteps())
			for i := range mos {
				mos[i] = randomVec(r, n)
			}
			st := u.NewState()
			want := slices.Clone(x0)
			x := slices.Clone(x0)
			var vec map[string][]float32
			for i := range u.NumSteps() {
				if want, err = u.Step(st, mos[i], u.Timestep(i), want); err != nil {
					t.Fatal(err)
				}
				saved := map[string][]float32{}
				for k, v := range vec {
					saved[k] = slices.Clone(v)
				}
				xin := slices.Clone(x)
				next, err := u.UpdateVectors(x, slices.Clone(mos[i]), x, i, vec)
				if err != nil {
					t.Fatal(err)
				}
				assertBitEqual(t, "step "+strconv.Itoa(i), x, want)
				for k, v := range vec {
					assertBitEqual(t, "prev "+k+" unchanged", v, saved[k])
				}
				again := slices.Clone(xin)
				if _, err := u.UpdateVectors(again, mos[i], xin, i, vec); err != nil {
					t.Fatal(err)
				}
				assertBitEqual(t, "replay of step "+strconv.Itoa(i), again, want)
				vec = next
			}
			if _, err := u.StateAt(2, map[string][]float32{}); err == nil {
				t.Error("StateAt accepted missing vectors")
			}
		})
	}
	f, err := NewFlowMatchEuler(DefaultFlowMatchConfig(), 3, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	st := f.NewState()
	x, want := []float32{1, 2}, []float32{1, 2}
	for i := range f.NumSteps() {
		if want, err = f.Step(st, []float32{0.5, -1}, f.Timestep(i), want); err != nil {
			t.Fatal(err)
		}
		if _, err := f.UpdateVectors(x, []float32{0.5, -1}, x, i, nil); err != nil {
			t.Fatal(err)
		}
		assertBitEqual(t, "flow-match step "+strconv.Itoa(i), x, want)
	}
}
