package wan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// The wan-dev folder: two experts split at t = 875, no expand_timesteps.
func TestOpenDev(t *testing.T) {
	f, err := Open(shared.Require(t, "golden", "wan-dev"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Index.ClassName != T2VPipeline || !f.HasBoundary || f.BoundaryRatio != 0.875 || f.ExpandTimesteps || f.Experts() != 2 {
		t.Fatalf("%+v", f)
	}
	for _, c := range []struct {
		t    float64
		want int
	}{{999, 1}, {875, 1}, {874.9, 2}, {374, 2}} {
		if got := f.ExpertFor(c.t, 1000); got != c.want {
			t.Errorf("ExpertFor(%g) = %d, want %d", c.t, got, c.want)
		}
	}
	cfg, err := f.TransformerConfig(2)
	if err != nil || cfg.InnerDim() != 40 {
		t.Fatalf("transformer_2 config: %+v, %v", cfg, err)
	}
	if _, err := f.TransformerDir(3); !errors.Is(err, ErrFolder) {
		t.Fatalf("expert 3: %v", err)
	}
}

// writeFolder makes a folder with the given model_index.json and transformer configs.
func writeFolder(t *testing.T, index string, transformers ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_index.json"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tr := range transformers {
		if err := os.MkdirAll(filepath.Join(dir, tr), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tr, "config.json"), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A folder that cannot run is one ErrFolder naming the file and the problem.
func TestOpenErrors(t *testing.T) {
	const tr = `"transformer": ["diffusers", "WanTransformer3DModel"]`
	const tr2 = `"transformer_2": ["diffusers", "WanTransformer3DModel"]`
	for _, c := range []struct {
		name, index string
		dirs        []string
		want        string
	}{
		{"boundary without transformer_2", `{"_class_name": "WanPipeline", "boundary_ratio": 0.875, ` + tr + `, "transformer_2": [null, null]}`, []string{"transformer"}, "boundary_ratio 0.875 is set"},
		{"transformer_2 folder missing", `{"_class_name": "WanPipeline", "boundary_ratio": 0.9, ` + tr + `, ` + tr2 + `}`, []string{"transformer"}, "transformer_2"},
		{"no transformer", `{"_class_name": "WanPipeline", "transformer": [null, null]}`, nil, "transformer is missing"},
		{"not wan", `{"_class_name": "StableVideoDiffusionPipeline"}`, nil, "_class_name"},
		{"bad boundary", `{"_class_name": "WanPipeline", "boundary_ratio": 1.5, ` + tr + `}`, []string{"transformer"}, "outside [0, 1]"},
		{"bad boundary type", `{"_class_name": "WanPipeline", "boundary_ratio": "x", ` + tr + `}`, []string{"transformer"}, "boundary_ratio"},
	} {
		dir := writeFolder(t, c.index, c.dirs...)
		_, err := Open(dir)
		if err == nil || !errors.Is(err, ErrFolder) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %v, want ErrFolder naming the folder and %q", c.name, err, c.want)
		}
	}
	// One transformer and no boundary: fine, one expert for every step.
	f, err := Open(writeFolder(t, `{"_class_name": "WanImageToVideoPipeline", "expand_timesteps": true, `+tr+`}`, "transformer"))
	if err != nil || f.Experts() != 1 || !f.ExpandTimesteps || f.ExpertFor(0, 1000) != 1 {
		t.Fatalf("single expert: %+v, %v", f, err)
	}
	if ok, err := IsWanIndex(f.Dir); !ok || err != nil {
		t.Fatalf("IsWanIndex: %v %v", ok, err)
	}
}

// FuzzOpen: any model_index.json gives a folder or an ErrFolder, never a panic.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"_class_name": "WanPipeline", "boundary_ratio": 0.875, "transformer": ["diffusers", "WanTransformer3DModel"], "transformer_2": ["diffusers", "WanTransformer3DModel"]}`))
	f.Add([]byte(`{"_class_name": "WanPipeline", "boundary_ratio": null, "expand_timesteps": true}`))
	dir := f.TempDir()
	for _, tr := range []string{"transformer", "transformer_2"} {
		if err := os.MkdirAll(filepath.Join(dir, tr), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tr, "config.json"), []byte(`{}`), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, index []byte) {
		if err := os.WriteFile(filepath.Join(dir, "model_index.json"), index, 0o644); err != nil {
			t.Fatal(err)
		}
		fo, err := Open(dir)
		if err != nil {
			if !errors.Is(err, ErrFolder) {
				t.Fatalf("error %v is not ErrFolder", err)
			}
			return
		}
		if fo.HasBoundary && (fo.BoundaryRatio < 0 || fo.BoundaryRatio > 1) {
			t.Fatalf("boundary %g accepted", fo.BoundaryRatio)
		}
	})
}
