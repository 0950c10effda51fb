package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/plan"
)

// `vdpp plan` measuring on 4 devices launches `vdpp worker calibrate` on 4 real processes
// and stores the all-gathers per group size (2, 4, and cp2 then cfg2) and the hand-off in
// the calibration file, which a second run reads back.
func TestPlanCalibratesProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cal.json")
	args := []string{"plan", "--model", "synthetic", "--devices", "4", "--step-ms", "0.5", "--steps", "4", "--num-samples", "4",
		"--num-frames", "4", "--height", "128", "--width", "128", "--max-guidance", "3", "--calibration", path}
	if out, err := exec.Command(vdpp(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("vdpp plan: %v\n%s", err, out)
	}
	cal, err := plan.LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{2, 4}
	if len(cal.Costs.AllGathers) != len(want) {
		t.Fatalf("all-gathers %+v, want sizes %v", cal.Costs.AllGathers, want)
	}
	for i, g := range cal.Costs.AllGathers {
		if g.Size != want[i] || g.Bytes != 4*4*4*16*16 || g.MS < 0 {
			t.Errorf("all-gather %d = %+v, want size %v of %d bytes", i, g, want[i], 4*4*4*16*16)
		}
	}
	if cal.Costs.HandOff.LatencyMS <= 0 || cal.Costs.CPAllToAllsPerStep != 0 {
		t.Errorf("hand-off %+v, cp all-to-alls %d", cal.Costs.HandOff, cal.Costs.CPAllToAllsPerStep)
	}
	if out, err := exec.Command(vdpp(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("vdpp plan from the file: %v\n%s", err, out)
	}
}
