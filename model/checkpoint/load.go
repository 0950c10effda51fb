package checkpoint

import (
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// DefaultMaxProblems is how many tensor problems one LoadError message lists.
const DefaultMaxProblems = 8

// LoadOptions tunes LoadTensors.
type LoadOptions struct {
	// Ignore lists names that may be in the file without being expected; they are neither
	// loaded nor reported (e.g. CLIP's "vision_model.embeddings.position_ids"). A name both
	// expected and ignored is expected.
	Ignore []string
	// MaxProblems caps the problems listed in the error message (DefaultMaxProblems when
	// 0); LoadError.Problems always holds all of them.
	MaxProblems int
}

// ProblemKind classifies a tensor problem.
type ProblemKind int

// Problem kinds, in the order they are reported for one tensor name.
const (
	Missing       ProblemKind = iota // expected, not in the file
	Unexpected                       // in the file, not expected
	ShapeMismatch                    // in both, shapes differ
	BadDType                         // in both, a type vdpp does not read
	Duplicate                        // two tensors of the file rename to the same name
)

// Problem is one mismatch between a weights file and the expected tensors.
type Problem struct {
	// Name is the network's name of the tensor (the file's, for an unexpected tensor).
	Name string
	// FileName is the tensor's name in the file when it differs from Name (a file in
	// another layout, see KeyMap); for a Duplicate, one of the two file names.
	FileName  string
	Kind      ProblemKind
	FileShape []int // the shape in the file (nil when Missing)
	Expected  []int // the expected shape (nil when Unexpected)
	// DType is the type as the file spells it ("BF16" in safetensors, "q4_K" in GGUF).
	DType safetensors.DType
	// Other is the other file name of a Duplicate.
	Other string
}

// String formats the problem as `tensor "name": ...`.
func (p Problem) String() string {
	name := fmt.Sprintf("tensor %q", p.Name)
	if p.FileName != "" && p.Kind != Duplicate {
		name += fmt.Sprintf(" (%q in the file)", p.FileName)
	}
	switch p.Kind {
	case Missing:
		return fmt.Sprintf("%s: missing from the file (expected shape %v)", name, p.Expected)
	case Unexpected:
		return fmt.Sprintf("%s: unexpected (shape %v, %s in file)", name, p.FileShape, p.DType)
	case ShapeMismatch:
		return fmt.Sprintf("%s: shape %v in file, expected %v", name, p.FileShape, p.Expected)
	case Duplicate:
		return fmt.Sprintf("%s: both %q and %q in the file are this tensor", name, p.FileName, p.Other)
	default:
		return fmt.Sprintf("%s: type %s in file is not one vdpp reads (%s)", name, p.DType, strings.Join(quant.Flags(), ", "))
	}
}

func (k ProblemKind) sentinel() error {
	switch k {
	case Missing:
		return ErrMissingTensor
	case Unexpected:
		return ErrUnexpectedTensor
	case ShapeMismatch:
		return ErrShapeMismatch
	case Duplicate:
		return ErrDuplicateTensor
	default:
		return ErrTensorDType
	}
}

// LoadError reports every mismatch between a weights file and the expected tensors. It
// matches (errors.Is) the sentinels of the kinds it contains.
type LoadError struct {
	Path     string
	Problems []Problem // sorted by name, then kind
	Max      int       // how many the message lists
	// Layout names the file's key layout when a KeyMap renamed its tensors ("Wan's
	// original layout"); the message says it.
	Layout string
}

// Error lists the first Max problems: with one problem,
// `path: tensor "conv_in.weight": shape [32 8 3 3] in file, expected [32 4 3 3]`.
func (e *LoadError) Error() string {
	path := e.Path
	if e.Layout != "" {
		path += " (read as " + e.Layout + ")"
	}
	if len(e.Problems) == 1 {
		return path + ": " + e.Problems[0].String()
	}
	maxN := e.Max
	if maxN <= 0 {
		maxN = DefaultMaxProblems
	}
	parts := make([]string, 0, maxN+1)
	for i, p := range e.Problems {
		if i == maxN {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-maxN))
			break
		}
		parts = append(parts, p.String())
	}
	return fmt.Sprintf("%s: %d tensor problems: %s", path, len(e.Problems), strings.Join(parts, "; "))
}

// Unwrap returns the distinct sentinels of the problems, for errors.Is.
func (e *LoadError) Unwrap() []error {
	var out []error
	seen := map[ProblemKind]bool{}
	for _, p := range e.Problems {
		if !seen[p.Kind] {
			seen[p.Kind] = true
			out = append(out, p.Kind.sentinel())
		}
	}
	return out
}

// CheckTensors compares the tensors of f with expected (name -> shape) and returns every
// problem, sorted by name then kind; nil means the file holds exactly the expected tensors.
func CheckTensors(f *safetensors.File, expected map[string][]int, opts LoadOptions) []Problem {
	infos := make(map[string]fileTensor, f.Len())
	for _, name := range f.Names() {
		infos[name], _ = describe(f, name)
	}
	return checkInfos(infos, expected, opts)
}

// LoadTensors checks that f holds exactly the expected tensors (name -> shape), apart from
// opts.Ignore, and returns them converted to float32 (F32, F16, BF16 and F64 files). Any
// missing, unexpected, mis-shaped or unconvertible tensor makes it return a *LoadError
// naming path (f.Path() when empty) and the tensors, and no tensors.
func LoadTensors(f *safetensors.File, path string, expected map[string][]int, opts LoadOptions) (map[string]*tensor.Dense, error) {
	if path == "" {
		path = f.Path()
	}
	if probs := CheckTensors(f, expected, opts); len(probs) > 0 {
		return nil, &LoadError{Path: path, Problems: probs, Max: opts.MaxProblems}
	}
	out := make(map[string]*tensor.Dense, len(expected))
	for name, shape := range expected {
		t, err := f.Tensor(name)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
		t.Shape = append([]int(nil), shape...)
		out[name] = t
	}
	return out, nil
}
