package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// ErrLoRA marks a LoRA that cannot be applied: unreadable, of an unknown layout, or not for
// this model.
var ErrLoRA = errors.New("lora")

// Layouts of a LoRA file's keys.
const (
	LayoutDiffusers = "diffusers"
	LayoutOriginal  = "original"
	LayoutKohya     = "kohya"
)

// Spec is one LoRA as a command line or a job names it: its file (a path, or a name in a
// server's LoRA folder) and its strength, the factor s of W + s·ΔW.
type Spec struct {
	Path     string  `json:"name"`
	Strength float64 `json:"strength"`
}

// String is the spec as ParseSpec reads it.
func (s Spec) String() string {
	return s.Path + ":" + strconv.FormatFloat(s.Strength, 'g', -1, 64)
}

// ParseSpec reads FILE[:STRENGTH] (strength 1 when absent). A path that itself ends in
// ":<number>" needs the strength written out.
func ParseSpec(v string) (Spec, error) {
	if v == "" {
		return Spec{}, fmt.Errorf("%w: an empty LoRA (want FILE[:STRENGTH])", ErrLoRA)
	}
	s := Spec{Path: v, Strength: 1}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		if f, err := strconv.ParseFloat(v[i+1:], 64); err == nil {
			s.Path, s.Strength = v[:i], f
		}
	}
	if s.Path == "" || math.IsNaN(s.Strength) || math.IsInf(s.Strength, 0) {
		return Spec{}, fmt.Errorf("%w: %q: want FILE[:STRENGTH] with a finite strength", ErrLoRA, v)
	}
	return s, nil
}

// Renamer renames a parameter's name between a file layout and the network's names (the
// family's table of its original release's names; checkpoint key maps satisfy it).
type Renamer interface {
	ToNetwork(file string) string
	ToFile(network string) string
}

// Target is what a LoRA is mapped onto: one denoiser's weights.
type Target struct {
	// Name is the network for messages ("the Wan transformer (30 blocks, dim 1536)").
	Name string
	// Component is the pipeline component's name, the prefix of diffusers' keys
	// ("transformer", "unet").
	Component string
	// Weights are the network's parameters: name -> shape.
	Weights map[string][]int
	// Original renames the original layout's parameter names (after OriginalPrefix) onto
	// the network's; nil when the family has no original layout besides diffusers'.
	Original       Renamer
	OriginalPrefix string
}

// File is a LoRA file read into float32 tensors with its safetensors metadata.
type File struct {
	Path     string
	Tensors  map[string]*tensor.Dense
	Metadata map[string]string
}

// Read reads a LoRA safetensors file (F32, F16, BF16 or F64 tensors, converted to float32).
func Read(path string) (*File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoRA, err)
	}
	defer f.Close()
	out := &File{Path: path, Tensors: map[string]*tensor.Dense{}, Metadata: f.Metadata()}
	for _, n := range f.Names() {
		t, err := f.Tensor(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %w", ErrLoRA, path, n, err)
		}
		out.Tensors[n] = t
	}
	if len(out.Tensors) == 0 {
		return nil, fmt.Errorf("%w: %s holds no tensors", ErrLoRA, path)
	}
	return out, nil
}

// ReadHeaders reads a LoRA file's tensor names and shapes and only the data of its scalars
// (the alphas): enough for Map to check the file against a target (Check) without reading
// the factors. The other tensors have nil Data.
func ReadHeaders(path string) (*File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoRA, err)
	}
	defer f.Close()
	out := &File{Path: path, Tensors: map[string]*tensor.Dense{}, Metadata: f.Metadata()}
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		if tensor.NumElements(info.Shape) > 1 {
			out.Tensors[n] = &tensor.Dense{Shape: info.Shape}
			continue
		}
		t, err := f.Tensor(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %w", ErrLoRA, path, n, err)
		}
		out.Tensors[n] = t
	}
	if len(out.Tensors) == 0 {
		return nil, fmt.Errorf("%w: %s holds no tensors", ErrLoRA, path)
	}
	return out, nil
}

// Check reads each spec's file headers and maps them onto t (Map), without reading the
// factors: the one-line error of the first file that does not fit.
func Check(specs []Spec, dir string, t Target) error {
	for _, s := range specs {
		path := s.Path
		if dir != "" {
			path = filepath.Join(dir, s.Path)
		}
		f, err := ReadHeaders(path)
		if err != nil {
			return err
		}
		if _, err := Map(f, t); err != nil {
			return err
		}
	}
	return nil
}

// Change is one weight's change from one LoRA: Scale·Up·Down for low-rank factors (Up
// [out, r], Down [r, in...]), or Scale·Full for a whole-tensor change (a diff, a bias).
type Change struct {
	Up, Down *tensor.Dense
	Full     *tensor.Dense
	Scale    float64
	// Key is the file's key it came from, for messages.
	Key string
}

// Adapter is a LoRA mapped onto a target: the changes of each weight it touches.
type Adapter struct {
	File    string
	Layout  string
	Changes map[string][]Change
	// Rank is the largest rank of its factors.
	Rank int
}

// Weights lists the weights the adapter changes, sorted.
func (a *Adapter) Weights() []string {
	out := make([]string, 0, len(a.Changes))
	for n := range a.Changes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Bytes is the memory the adapter's tensors take in float32.
func (a *Adapter) Bytes() int64 {
	var n int64
	for _, cs := range a.Changes {
		for _, c := range cs {
			for _, t := range []*tensor.Dense{c.Up, c.Down, c.Full} {
				if t != nil {
					n += 4 * int64(len(t.Data))
				}
			}
		}
	}
	return n
}

// part is one tensor of a module: which role it plays.
type part int

const (
	partDown part = iota
	partUp
	partUpBias
	partAlpha
	partDiff
	partDiffB
	partDiffM
)

// suffixes map a key's ending to its role, the longest first.
var suffixes = []struct {
	s string
	p part
}{
	{".lora_down.weight", partDown}, {".lora_A.weight", partDown},
	{".lora_up.weight", partUp}, {".lora_B.weight", partUp},
	{".lora_B.bias", partUpBias}, {".alpha", partAlpha},
	{".diff_b", partDiffB}, {".diff_m", partDiffM}, {".diff", partDiff},
}

// unsupported are parts of LoRA variants vdpp does not implement.
var unsupported = []string{".dora_scale", ".lora_mid.weight", ".hada_", ".lokr_", ".lora_magnitude_vector"}

type module struct {
	parts map[part]*tensor.Dense
	keys  map[part]string
}

// Map maps a LoRA file onto a target (see the package doc). The error is one line naming
// the file and the first key that does not fit.
func Map(f *File, t Target) (*Adapter, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrLoRA, f.Path}, a...)...)
	}
	names := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	layout, err := detect(names, t)
	if err != nil {
		return nil, bad("%v", err)
	}
	mods := map[string]*module{}
	var order []string
	for _, n := range names {
		for _, u := range unsupported {
			if strings.Contains(n, u) {
				return nil, bad("key %s: %s factors (DoRA, LoCon mid, LoHa, LoKr) are not supported", n, strings.Trim(u, "._"))
			}
		}
		base, p, ok := "", part(0), false
		for _, s := range suffixes {
			if strings.HasSuffix(n, s.s) {
				base, p, ok = strings.TrimSuffix(n, s.s), s.p, true
				break
			}
		}
		if !ok {
			return nil, bad("key %s is not a LoRA factor (want .lora_A/.lora_B, .lora_down/.lora_up, .alpha, .diff or .diff_b)", n)
		}
		m := mods[base]
		if m == nil {
			m = &module{parts: map[part]*tensor.Dense{}, keys: map[part]string{}}
			mods[base] = m
			order = append(order, base)
		}
		m.parts[p], m.keys[p] = f.Tensors[n], n
	}
	kohya := map[string]string{}
	if layout == LayoutKohya {
		kohya = kohyaNames(t)
	}
	globalScale, err := peftScale(f, layout)
	if err != nil {
		return nil, bad("%v", err)
	}
	a := &Adapter{File: f.Path, Layout: layout, Changes: map[string][]Change{}}
	for _, base := range order {
		m := mods[base]
		firstKey := m.keys[minPart(m)]
		// The network's names of the module's weight and bias (and of the module's own
		// parameter, for a diff of a parameter that is not a layer's weight).
		var weight, bias, param, modulation string
		switch layout {
		case LayoutDiffusers:
			mod := strings.TrimPrefix(strings.TrimPrefix(base, t.Component+"."), "base_model.model.")
			weight, bias, param = mod+".weight", mod+".bias", mod
		case LayoutOriginal:
			mod := strings.TrimPrefix(base, t.OriginalPrefix)
			weight, bias, param = t.Original.ToNetwork(mod+".weight"), t.Original.ToNetwork(mod+".bias"), t.Original.ToNetwork(mod)
			modulation = t.Original.ToNetwork(mod + ".modulation")
		case LayoutKohya:
			mod, ok := kohya[base]
			if !ok {
				return nil, bad("key %s names no layer of %s: a LoRA for another model?", firstKey, t.Name)
			}
			weight, bias, param = mod+".weight", mod+".bias", mod
		}
		if d := m.parts[partDiffM]; d != nil {
			// A block's (or the head's) modulation change: lightx2v's diff_m.
			if len(m.parts) != 1 {
				return nil, bad("key %s: a modulation change with other parts", m.keys[partDiffM])
			}
			mshape, ok := t.Weights[modulation]
			if !ok {
				return nil, bad("key %s (modulation %s) matches no parameter of %s", m.keys[partDiffM], modulation, t.Name)
			}
			if !slices.Equal(d.Shape, mshape) {
				return nil, bad("key %s is %v but %s of %s is %v: a LoRA for another model size", m.keys[partDiffM], d.Shape, modulation, t.Name, mshape)
			}
			a.Changes[modulation] = append(a.Changes[modulation], Change{Full: d, Scale: 1, Key: m.keys[partDiffM]})
			continue
		}
		shape, ok := t.Weights[weight]
		if !ok && m.parts[partDown] == nil && m.parts[partUp] == nil && m.parts[partUpBias] == nil && m.parts[partDiffB] == nil {
			weight, shape, ok = param, t.Weights[param], t.Weights[param] != nil
		}
		if !ok {
			return nil, bad("key %s (weight %s) matches no weight of %s: a LoRA for another model?", firstKey, weight, t.Name)
		}
		down, up := m.parts[partDown], m.parts[partUp]
		if (down == nil) != (up == nil) {
			return nil, bad("key %s has no matching %s factor", firstKey, map[bool]string{true: "up (lora_B / lora_up)", false: "down (lora_A / lora_down)"}[down != nil])
		}
		if down != nil {
			c, err := factors(f, t, m, weight, shape, globalScale)
			if err != nil {
				return nil, err
			}
			a.Rank = max(a.Rank, c.Down.Shape[0])
			a.Changes[weight] = append(a.Changes[weight], c)
		}
		if d := m.parts[partDiff]; d != nil {
			if !slices.Equal(d.Shape, shape) {
				return nil, bad("key %s is %v but %s of %s is %v: a LoRA for another model size", m.keys[partDiff], d.Shape, weight, t.Name, shape)
			}
			a.Changes[weight] = append(a.Changes[weight], Change{Full: d, Scale: 1, Key: m.keys[partDiff]})
		}
		for _, bp := range []part{partDiffB, partUpBias} {
			d := m.parts[bp]
			if d == nil {
				continue
			}
			bshape, ok := t.Weights[bias]
			if !ok {
				return nil, bad("key %s (bias %s) matches no bias of %s", m.keys[bp], bias, t.Name)
			}
			if !slices.Equal(d.Shape, bshape) {
				return nil, bad("key %s is %v but %s of %s is %v: a LoRA for another model size", m.keys[bp], d.Shape, bias, t.Name, bshape)
			}
			s := 1.0
			if bp == partUpBias {
				s = globalScale // PEFT's lora_bias is scaled like the factors
			}
			a.Changes[bias] = append(a.Changes[bias], Change{Full: d, Scale: s, Key: m.keys[bp]})
		}
		if m.parts[partAlpha] != nil && down == nil {
			return nil, bad("key %s has no factors to scale", m.keys[partAlpha])
		}
	}
	if len(a.Changes) == 0 {
		return nil, bad("no weight of %s changes", t.Name)
	}
	return a, nil
}

// minPart is the module's first part present, for messages.
func minPart(m *module) part {
	for p := partDown; p <= partDiffM; p++ {
		if _, ok := m.parts[p]; ok {
			return p
		}
	}
	return partDown
}

// factors checks a module's low-rank factors against its weight and returns its change.
func factors(f *File, t Target, m *module, weight string, shape []int, globalScale float64) (Change, error) {
	down, up := m.parts[partDown], m.parts[partUp]
	kd, ku := m.keys[partDown], m.keys[partUp]
	if len(down.Shape) < 2 || len(up.Shape) < 2 || len(shape) < 2 {
		return Change{}, fmt.Errorf("%w: %s: keys %s %v, %s %v do not factor weight %s %v of %s", ErrLoRA, f.Path, kd, down.Shape, ku, up.Shape, weight, shape, t.Name)
	}
	r := down.Shape[0]
	in := tensor.NumElements(down.Shape[1:])
	// An up factor of a convolution is [out, r, 1, 1...]; the down factor [r, in, k...].
	upOut, upR := up.Shape[0], tensor.NumElements(up.Shape[1:])
	if upR != r || upOut != shape[0] || in != tensor.NumElements(shape[1:]) {
		return Change{}, fmt.Errorf("%w: %s: keys %s %v and %s %v do not fit %s %v of %s: a LoRA for another model size", ErrLoRA, f.Path, kd, down.Shape, ku, up.Shape, weight, shape, t.Name)
	}
	scale := globalScale
	if al := m.parts[partAlpha]; al != nil {
		if al.Len() != 1 || !(al.Data[0] > 0) {
			return Change{}, fmt.Errorf("%w: %s: key %s is not one positive alpha", ErrLoRA, f.Path, m.keys[partAlpha])
		}
		scale = float64(al.Data[0]) / float64(r) // the forward pass's alpha / rank
	}
	return Change{Up: &tensor.Dense{Shape: []int{upOut, r}, Data: up.Data}, Down: &tensor.Dense{Shape: []int{r, in}, Data: down.Data}, Scale: scale, Key: kd}, nil
}

// detect returns the layout of a file's keys.
func detect(names []string, t Target) (string, error) {
	var seen []string
	add := func(l string) {
		if !slices.Contains(seen, l) {
			seen = append(seen, l)
		}
	}
	for _, n := range names {
		switch {
		case t.OriginalPrefix != "" && strings.HasPrefix(n, t.OriginalPrefix):
			if t.Original == nil {
				return "", fmt.Errorf("key %s is in an original layout, which %s does not have", n, t.Name)
			}
			add(LayoutOriginal)
		case strings.HasPrefix(n, "lora_unet_"):
			add(LayoutKohya)
		case strings.HasPrefix(n, "lora_te"):
			return "", fmt.Errorf("key %s is a text encoder's (vdpp applies LoRAs to the denoiser only)", n)
		default:
			add(LayoutDiffusers)
		}
	}
	if len(seen) > 1 {
		return "", fmt.Errorf("the keys mix the %s layouts", strings.Join(seen, " and "))
	}
	return seen[0], nil
}

// kohyaNames maps kohya's module names ("lora_unet_" + the module with "_" for ".") to the
// network's modules: each layer's own name, and its name in the original layout.
func kohyaNames(t Target) map[string]string {
	out := map[string]string{}
	us := func(s string) string { return "lora_unet_" + strings.ReplaceAll(s, ".", "_") }
	for n := range t.Weights {
		mod, ok := strings.CutSuffix(n, ".weight")
		if !ok {
			continue
		}
		out[us(mod)] = mod
		if t.Original != nil {
			if f, ok := strings.CutSuffix(t.Original.ToFile(n), ".weight"); ok {
				out[us(f)] = mod
			}
		}
	}
	return out
}

// peftScale is the scale of a diffusers-layout file's factors: lora_alpha / r from its
// "lora_adapter_metadata" (as diffusers builds PEFT's LoraConfig from it), else 1 (PEFT's
// lora_alpha = r). Per-module rank or alpha patterns are refused.
func peftScale(f *File, layout string) (float64, error) {
	meta, ok := f.Metadata["lora_adapter_metadata"]
	if layout != LayoutDiffusers || !ok {
		return 1, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return 0, fmt.Errorf("lora_adapter_metadata: %v", err)
	}
	// The metadata may describe several components ("transformer.r", ...) or one.
	get := func(k string) (float64, bool) {
		for _, key := range []string{k, "transformer." + k, "unet." + k} {
			if raw, ok := m[key]; ok {
				var v float64
				if json.Unmarshal(raw, &v) == nil {
					return v, true
				}
			}
		}
		return 0, false
	}
	for _, p := range []string{"rank_pattern", "alpha_pattern"} {
		for _, key := range []string{p, "transformer." + p, "unet." + p} {
			if raw, ok := m[key]; ok && string(raw) != "{}" && string(raw) != "null" {
				return 0, fmt.Errorf("lora_adapter_metadata: a per-module %s is not supported", p)
			}
		}
	}
	r, okR := get("r")
	alpha, okA := get("lora_alpha")
	if !okR || !okA || !(r > 0) || !(alpha > 0) {
		return 1, nil
	}
	return alpha / r, nil
}

// Use is an adapter applied with a strength.
type Use struct {
	Adapter  *Adapter
	Strength float64
}

// Set is the LoRAs applied to one denoiser, in order.
type Set []Use

// Delta is one change of a weight ready for the network: W + Up·Down (the factors already
// scaled by strength·α/r, Up [out, r] and Down [r, in...] flattened to 2-D) or W + Full.
type Delta struct {
	Up, Down *tensor.Dense
	Full     *tensor.Dense
}

// Deltas returns every changed weight's deltas, in the set's order: the up factor (or the
// whole-tensor change) multiplied by float32(strength·scale), the down factor shared.
func (s Set) Deltas() map[string][]Delta {
	out := map[string][]Delta{}
	for _, u := range s {
		for _, w := range u.Adapter.Weights() {
			for _, c := range u.Adapter.Changes[w] {
				k := float32(u.Strength * c.Scale)
				if c.Full != nil {
					out[w] = append(out[w], Delta{Full: scaled(c.Full, k)})
					continue
				}
				out[w] = append(out[w], Delta{Up: scaled(c.Up, k), Down: c.Down})
			}
		}
	}
	return out
}

func scaled(t *tensor.Dense, k float32) *tensor.Dense {
	out := &tensor.Dense{Shape: slices.Clone(t.Shape), Data: make([]float32, len(t.Data))}
	for i, v := range t.Data {
		out.Data[i] = v * k
	}
	return out
}

// Load reads and maps each spec's file onto t (paths relative to dir when dir is not "").
func Load(specs []Spec, dir string, t Target) (Set, error) {
	var out Set
	cache := map[string]*Adapter{}
	for _, s := range specs {
		path := s.Path
		if dir != "" {
			path = filepath.Join(dir, s.Path)
		}
		a, ok := cache[path]
		if !ok {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrLoRA, err)
			}
			f, err := Read(path)
			if err != nil {
				return nil, err
			}
			if a, err = Map(f, t); err != nil {
				return nil, err
			}
			cache[path] = a
		}
		out = append(out, Use{Adapter: a, Strength: s.Strength})
	}
	return out, nil
}
