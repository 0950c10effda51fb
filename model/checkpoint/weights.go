package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Weights file stems: diffusers models save diffusion_pytorch_model[.variant].safetensors,
// transformers models model[.variant].safetensors (each possibly sharded).
const (
	DiffusersStem    = "diffusion_pytorch_model"
	TransformersStem = "model"
)

// WeightsStem is the weights file stem of a component of library ("transformers" or
// "diffusers", model_index.json's first item).
func WeightsStem(library string) string {
	if library == "transformers" {
		return TransformersStem
	}
	return DiffusersStem
}

// WeightsFileName returns the weights file name of stem for a variant: "" gives
// "<stem>.safetensors", "fp16" gives "<stem>.fp16.safetensors".
func WeightsFileName(stem, variant string) (string, error) {
	if variant == "" {
		return stem + ".safetensors", nil
	}
	if strings.ContainsAny(variant, `/\`) || strings.HasPrefix(variant, ".") {
		return "", fmt.Errorf("%w: invalid variant %q", ErrWeights, variant)
	}
	return stem + "." + variant + ".safetensors", nil
}

// WeightsPath returns the weights of a component model_index.json lists, for variant (""
// or e.g. "fp16"), named after its library (WeightsStem):
// <stem>[.variant].safetensors when it exists, else its shard index
// <stem>[.variant].safetensors.index.json. The error names the missing file and the
// variant and lists the weights files that are there.
func (c *Checkpoint) WeightsPath(component, variant string) (string, error) {
	ref, err := c.Ref(component)
	if err != nil {
		return "", err
	}
	name, err := WeightsFileName(WeightsStem(ref.Library), variant)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, component, name)
	st, err := os.Stat(path)
	if err == nil && st.Mode().IsRegular() {
		return path, nil
	}
	if ist, ierr := os.Stat(path + IndexSuffix); ierr == nil && ist.Mode().IsRegular() {
		return path + IndexSuffix, nil
	}
	if err == nil {
		err = fmt.Errorf("not a regular file")
	}
	v := variant
	if v == "" {
		v = "default (fp32)"
	}
	have := c.weightFiles(component)
	hint := "no weights files there"
	if len(have) > 0 {
		hint = "present: " + strings.Join(have, ", ")
	}
	return "", fmt.Errorf("%s: %w for variant %q (%s): %v", path, ErrWeights, v, hint, err)
}

// weightFiles lists the *.safetensors / *.bin files in a component folder.
func (c *Checkpoint) weightFiles(component string) []string {
	ents, err := os.ReadDir(c.ComponentDir(component))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".bin") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// OpenWeights opens a component's weights file for variant (validating its header) and
// returns it with its path; the caller closes the file. A sharded component has no one
// file: it is ErrWeights here, and OpenComponent reads it.
func (c *Checkpoint) OpenWeights(component, variant string) (*safetensors.File, string, error) {
	path, err := c.WeightsPath(component, variant)
	if err != nil {
		return nil, "", err
	}
	if strings.HasSuffix(path, IndexSuffix) {
		return nil, path, fmt.Errorf("%s: %w: sharded weights have no single file (OpenComponent reads them)", path, ErrWeights)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, path, err
	}
	return f, path, nil
}

// OpenComponent opens a component's weights for variant (see WeightsPath: one file or the
// shards its index names), checks them against expected as OpenDir does, and returns them
// kept in their stored dtype (see Stored). The caller closes them.
func (c *Checkpoint) OpenComponent(component, variant string, expected map[string][]int, opts LoadOptions) (*Stored, error) {
	path, err := c.WeightsPath(component, variant)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, IndexSuffix) {
		return openSharded(c.ComponentDir(component), path, expected, LoadDirOptions{LoadOptions: opts})
	}
	return OpenFile(path, expected, LoadDirOptions{LoadOptions: opts})
}

// LoadComponent is OpenComponent returning every tensor converted to float32 in fresh
// memory; the files are closed before it returns. A network copying its weights onto a
// backend should use OpenComponent and Stored.Each instead.
func (c *Checkpoint) LoadComponent(component, variant string, expected map[string][]int, opts LoadOptions) (map[string]*tensor.Dense, error) {
	s, err := c.OpenComponent(component, variant, expected, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Tensors()
}
