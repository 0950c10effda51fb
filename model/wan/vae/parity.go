package vae

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// TensorError is how far one output of a reference case is from the reference.
type TensorError struct {
	Name   string
	Shape  []int
	RelL2  float64 // ‖got − ref‖ / ‖ref‖
	MaxAbs float64
}

// caseInfo is the part of a case's case.json the runners read: the enable_tiling
// arguments of a tiled case.
type caseInfo struct {
	Args struct {
		EnableTiling *struct {
			MinHeight    int `json:"tile_sample_min_height"`
			MinWidth     int `json:"tile_sample_min_width"`
			StrideHeight int `json:"tile_sample_stride_height"`
			StrideWidth  int `json:"tile_sample_stride_width"`
		} `json:"enable_tiling"`
	} `json:"args"`
}

// readCase reads a case folder: inputs.safetensors, outputs.safetensors and the tiling of
// case.json (nil when absent or untiled).
func readCase(dir string) (in, out map[string]*tensor.Dense, tiling *Tiling, err error) {
	if in, err = readTensors(filepath.Join(dir, "inputs.safetensors")); err != nil {
		return nil, nil, nil, err
	}
	if out, err = readTensors(filepath.Join(dir, "outputs.safetensors")); err != nil {
		return nil, nil, nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		if os.IsNotExist(err) {
			return in, out, nil, nil
		}
		return nil, nil, nil, err
	}
	var ci caseInfo
	if err := json.Unmarshal(data, &ci); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, "case.json"), err)
	}
	if t := ci.Args.EnableTiling; t != nil {
		tiling = &Tiling{MinHeight: t.MinHeight, MinWidth: t.MinWidth, StrideHeight: t.StrideHeight, StrideWidth: t.StrideWidth}
	}
	return in, out, tiling, nil
}

// readTensors reads every tensor of a safetensors file as float32.
func readTensors(path string) (map[string]*tensor.Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, n := range f.Names() {
		if out[n], err = f.Tensor(n); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}

// compare measures got against the reference tensor name of want.
func compare(name string, got, want *tensor.Dense) (TensorError, error) {
	if got == nil || !tensor.SameShape(got, want) {
		var gs []int
		if got != nil {
			gs = got.Shape
		}
		return TensorError{}, fmt.Errorf("wan/vae: %s: shape %v, reference %v", name, gs, want.Shape)
	}
	return TensorError{Name: name, Shape: want.Shape, RelL2: tensor.RelL2(got, want), MaxAbs: tensor.MaxAbsDiff(got, want)}, nil
}

// EncodeCase runs Encode on the case's input "video" (tiled when its case.json names
// enable_tiling) and compares every posterior tensor in its outputs (moments, mean,
// logvar, std) with the reference. The case folder is laid out as the golden sets are
// (inputs.safetensors, outputs.safetensors, case.json).
func EncodeCase(v *VAE, dir string) ([]TensorError, error) {
	in, want, tiling, err := readCase(dir)
	if err != nil {
		return nil, err
	}
	video, ok := in["video"]
	if !ok {
		return nil, fmt.Errorf("wan/vae: %s: inputs have no \"video\"", dir)
	}
	if v, err = v.WithOptions(Options{Tiling: tiling}); err != nil {
		return nil, err
	}
	p, err := v.Encode(video)
	if err != nil {
		return nil, err
	}
	got := map[string]*tensor.Dense{"moments": p.Moments, "mean": p.Mean, "logvar": p.LogVar, "std": p.Std}
	var res []TensorError
	for _, name := range sortedKeys(want) {
		g, ok := got[name]
		if !ok {
			continue // a decode output of the same case
		}
		e, err := compare(name, g, want[name])
		if err != nil {
			return nil, err
		}
		res = append(res, e)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("wan/vae: %s: no encoder outputs to compare", dir)
	}
	return res, nil
}

// DecodeCase runs Decode for every video output of the case and compares it with the
// reference: "video" from "latents" (tiled when case.json names enable_tiling),
// "video_1frame" from "latents_1frame", "video_untiled" from "latents" without tiling.
func DecodeCase(v *VAE, dir string) ([]TensorError, error) {
	in, want, tiling, err := readCase(dir)
	if err != nil {
		return nil, err
	}
	var res []TensorError
	for _, name := range sortedKeys(want) {
		if !strings.HasPrefix(name, "video") {
			continue
		}
		input, t := "latents", tiling
		switch name {
		case "video":
		case "video_untiled":
			t = nil
		default:
			input = "latents" + strings.TrimPrefix(name, "video")
		}
		z, ok := in[input]
		if !ok {
			return nil, fmt.Errorf("wan/vae: %s: output %q has no input %q", dir, name, input)
		}
		vt, err := v.WithOptions(Options{Tiling: t})
		if err != nil {
			return nil, err
		}
		got, err := vt.Decode(z)
		if err != nil {
			return nil, fmt.Errorf("wan/vae: %s: %s: %w", dir, name, err)
		}
		e, err := compare(name, got, want[name])
		if err != nil {
			return nil, err
		}
		res = append(res, e)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("wan/vae: %s: no video outputs to compare", dir)
	}
	return res, nil
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}
