package wan

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/wan/transformer"
)

// ErrFolder: the folder is not a Wan pipeline folder that can run.
var ErrFolder = errors.New("wan: bad model folder")

// Pipeline classes this family reads.
const (
	T2VPipeline = "WanPipeline"
	I2VPipeline = "WanImageToVideoPipeline"
)

// Component folder names of a Wan pipeline.
const (
	Transformer  = "transformer"
	Transformer2 = "transformer_2"
	VAE          = "vae"
	Scheduler    = "scheduler"
)

// Folder is an opened diffusers Wan folder: its model_index.json, checked.
type Folder struct {
	Dir   string
	Index checkpoint.ModelIndex
	// BoundaryRatio is model_index.json's boundary_ratio; HasBoundary is false when it is
	// null or absent (one transformer for every step).
	BoundaryRatio float64
	HasBoundary   bool
	// ExpandTimesteps is model_index.json's expand_timesteps (Wan 2.2 TI2V: the
	// transformer gets one timestep per token, 0 where the first frame is given).
	ExpandTimesteps bool
}

// IsWanIndex reports whether dir/model_index.json names a Wan pipeline class, reading
// nothing else; a missing or unreadable index is an error.
func IsWanIndex(dir string) (bool, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return false, err
	}
	return isWanClass(ck.Index.ClassName), nil
}

func isWanClass(c string) bool { return c == T2VPipeline || c == I2VPipeline }

// Open reads dir/model_index.json and checks that the folder is a Wan pipeline that can
// run (see the package contract). Weights are not read.
func Open(dir string) (*Folder, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFolder, err)
	}
	index := filepath.Join(dir, checkpoint.IndexFile)
	if !isWanClass(ck.Index.ClassName) {
		return nil, fmt.Errorf("%s: %w: _class_name %q is not %s or %s", index, ErrFolder, ck.Index.ClassName, T2VPipeline, I2VPipeline)
	}
	f := &Folder{Dir: dir, Index: ck.Index}
	data, err := os.ReadFile(index)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", index, ErrFolder, err)
	}
	var attrs struct {
		BoundaryRatio   *float64 `json:"boundary_ratio"`
		ExpandTimesteps *bool    `json:"expand_timesteps"`
	}
	if err := json.Unmarshal(data, &attrs); err != nil {
		return nil, fmt.Errorf("%s: %w: boundary_ratio / expand_timesteps: %v", index, ErrFolder, err)
	}
	if attrs.BoundaryRatio != nil {
		f.BoundaryRatio, f.HasBoundary = *attrs.BoundaryRatio, true
		if !(f.BoundaryRatio >= 0 && f.BoundaryRatio <= 1) {
			return nil, fmt.Errorf("%s: %w: boundary_ratio %g is outside [0, 1]", index, ErrFolder, f.BoundaryRatio)
		}
	}
	if attrs.ExpandTimesteps != nil {
		f.ExpandTimesteps = *attrs.ExpandTimesteps
	}
	if err := f.checkTransformer(Transformer, "every step"); err != nil {
		return nil, err
	}
	if f.HasBoundary {
		if err := f.checkTransformer(Transformer2, fmt.Sprintf("the low-noise steps (boundary_ratio %g is set)", f.BoundaryRatio)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// checkTransformer checks that a transformer component is listed and has a config.
func (f *Folder) checkTransformer(name, role string) error {
	index := filepath.Join(f.Dir, checkpoint.IndexFile)
	if _, ok := f.Index.Components[name]; !ok {
		return fmt.Errorf("%s: %w: %s is missing (null or not listed); it runs %s", index, ErrFolder, name, role)
	}
	cfg := filepath.Join(f.Dir, name, transformer.ConfigFile)
	if _, err := os.Stat(cfg); err != nil {
		return fmt.Errorf("%s: %w: %s runs %s: %w", cfg, ErrFolder, name, role, err)
	}
	return nil
}

// Experts returns how many transformers the pipeline runs: 2 with a boundary, else 1.
func (f *Folder) Experts() int {
	if f.HasBoundary {
		return 2
	}
	return 1
}

// BoundaryTimestep is boundary_ratio·numTrainTimesteps, the first timestep of the
// high-noise expert's range; ok is false without a boundary.
func (f *Folder) BoundaryTimestep(numTrainTimesteps int) (t float64, ok bool) {
	if !f.HasBoundary {
		return 0, false
	}
	return f.BoundaryRatio * float64(numTrainTimesteps), true
}

// ExpertFor returns which transformer runs timestep t, as WanPipeline picks it: 1
// (`transformer`) when there is no boundary or t >= the boundary timestep, else 2
// (`transformer_2`).
func (f *Folder) ExpertFor(t float64, numTrainTimesteps int) int {
	if b, ok := f.BoundaryTimestep(numTrainTimesteps); ok && t < b {
		return 2
	}
	return 1
}

// ComponentDir returns the folder of a component.
func (f *Folder) ComponentDir(name string) string { return filepath.Join(f.Dir, name) }

// TransformerDir returns the folder of expert 1 (`transformer`) or 2 (`transformer_2`).
func (f *Folder) TransformerDir(expert int) (string, error) {
	switch {
	case expert == 1:
		return f.ComponentDir(Transformer), nil
	case expert == 2 && f.HasBoundary:
		return f.ComponentDir(Transformer2), nil
	}
	return "", fmt.Errorf("%w: %s has no expert %d (it runs %d)", ErrFolder, f.Dir, expert, f.Experts())
}

// TransformerConfig reads expert's config.json.
func (f *Folder) TransformerConfig(expert int) (transformer.Config, error) {
	dir, err := f.TransformerDir(expert)
	if err != nil {
		return transformer.Config{}, err
	}
	return transformer.ReadConfig(dir)
}

// LoadTransformer loads expert 1 or 2 with weights variant ("" for fp32, "fp16", "bf16")
// onto backend.
func (f *Folder) LoadTransformer(expert int, variant string, backend backends.Backend) (*transformer.Model, error) {
	return f.LoadTransformerWith(expert, transformer.LoadOptions{Variant: variant}, backend)
}

// LoadTransformerWith loads expert 1 or 2 with the weights o names onto backend.
func (f *Folder) LoadTransformerWith(expert int, o transformer.LoadOptions, backend backends.Backend) (*transformer.Model, error) {
	dir, err := f.TransformerDir(expert)
	if err != nil {
		return nil, err
	}
	return transformer.LoadWith(dir, o, backend)
}

// ExpertComponent is the component of expert 1 (`transformer`) or 2 (`transformer_2`).
func ExpertComponent(expert int) string {
	if expert == 2 {
		return Transformer2
	}
	return Transformer
}
