package wan_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// A First Block Cache run on the dev checkpoint skips calls and changes the frames; pipeline
// and CFG-parallel meshes give its frames and decisions bit for bit; a context-parallel
// mesh takes the same decisions (the indicator's sums are all-gathered, so every member
// compares the one value, and none waits in an exchange the others skip) and frames
// within 1e-5.
func TestFirstBlockCacheMeshes(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	in := devEmbeddings(t, dir)
	p := family.Params{NumFrames: 9, Steps: 8, Height: 64, Width: 64, GuidanceScale: 4, GuidanceScale2: 3, Seed: 5}
	plain := generateMesh(t, dir, in, p, 1, 1, 1, 1, 1)
	p.Cache = pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.12}
	want, wantLogs := generateMeshLogs(t, dir, in, p, 1, 1, 1, 1, 1)
	skipped := 0
	for _, r := range wantLogs[0] {
		if !r.Computed {
			skipped++
		}
	}
	if skipped == 0 || len(wantLogs[0]) != 2*p.Steps {
		t.Fatalf("%d of %d calls skipped (records %v)", skipped, len(wantLogs[0]), wantLogs[0])
	}
	if tensor.BitEqual(want[0], plain[0]) {
		t.Fatal("the cached frames are the uncached ones")
	}
	for _, m := range []struct {
		pp, cfg, cp int
		exact       bool
	}{
		{3, 1, 1, true},
		{1, 2, 1, true},
		{1, 1, 2, false},
	} {
		t.Run(fmt.Sprintf("pp%d_cfg%d_cp%d", m.pp, m.cfg, m.cp), func(t *testing.T) {
			got, logs := generateMeshLogs(t, dir, in, p, m.pp, m.cfg, m.cp, 1, 1)
			rel := tensor.RelL2(got[0], want[0])
			if m.exact && !tensor.BitEqual(got[0], want[0]) || rel > 1e-5 {
				t.Fatalf("frames differ from one rank's (rel L2 %.3g)", rel)
			}
			if len(logs[0]) != len(wantLogs[0]) {
				t.Fatalf("%d records, want %d", len(logs[0]), len(wantLogs[0]))
			}
			for i, r := range logs[0] {
				w := wantLogs[0][i]
				dv := 0.0
				if !math.IsNaN(float64(w.Value)) {
					dv = math.Abs(float64(r.Value-w.Value)) / math.Abs(float64(w.Value))
				}
				if r.Step != w.Step || r.Branch != w.Branch || r.Expert != w.Expert || r.Computed != w.Computed ||
					math.IsNaN(float64(r.Value)) != math.IsNaN(float64(w.Value)) || dv > 1e-5 || m.exact && dv != 0 {
					t.Fatalf("record %d: %+v, one rank %+v", i, r, w)
				}
			}
		})
	}
}
