package checkpoint

import (
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
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
	BadDType                         // in both, dtype not convertible to float32
)

// Problem is one mismatch between a weights file and the expected tensors.
type Problem struct {
	Name      string
	Kind      ProblemKind
	FileShape []int // the shape in the file (nil when Missing)
	Expected  []int // the expected shape (nil when Unexpected)
	DType     safetensors.DType
}

// String formats the problem as `tensor "name": ...`.
func (p Problem) String() string {
	switch p.Kind {
	case Missing:
		return fmt.Sprintf("tensor %q: missing from the file (expected shape %v)", p.Name, p.Expected)
	case Unexpected:
		return fmt.Sprintf("tensor %q: unexpected (shape %v, %s in file)", p.Name, p.FileShape, p.DType)
	case ShapeMismatch:
		return fmt.Sprintf("tensor %q: shape %v in file, expected %v", p.Name, p.FileShape, p.Expected)
	default:
		return fmt.Sprintf("tensor %q: dtype %s in file does not convert to float32", p.Name, p.DType)
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
}

// Error lists the first Max problems: with one problem,
// `path: tensor "conv_in.weight": shape [32 8 3 3] in file, expected [32 4 3 3]`.
func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return e.Path + ": " + e.Problems[0].String()
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
	return fmt.Sprintf("%s: %d tensor problems: %s", e.Path, len(e.Problems), strings.Join(parts, "; "))
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
	infos := make(map[string]safetensors.TensorInfo, f.Len())
	for _, name := range f.Names() {
		infos[name], _ = f.Info(name)
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
