// Package paritycheck holds what the parity checkers (model/svd/parity, model/wan/parity,
// sched/schedparity) share: the layout of a reference case folder, the compared-tensor
// Result, tolerance limits and float32 ulp distances.
//
// Contract: a case folder is DIR/cases/NAME holding case.json ({"case": kind, "args": {...}}),
// inputs.safetensors and outputs.safetensors. ListCases returns the folders sorted and fails
// when there are none; ReadCase reads one, taking the kind from case.json (the folder name
// when absent). Errors carry no package prefix: each checker wraps them with its own. Nothing
// here decides which tensors a case holds or how they are computed; that is the checkers' job.
package paritycheck

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// Result is one compared tensor.
type Result struct {
	Case   string  `json:"case"`
	Tensor string  `json:"tensor"`
	Shape  []int   `json:"shape,omitempty"`
	RelL2  float64 `json:"rel_l2"`
	MaxAbs float64 `json:"max_abs"`
	MaxULP int64   `json:"max_ulp"`
	Limit  string  `json:"limit"`
	Pass   bool    `json:"pass"`
	Error  string  `json:"error,omitempty"`
}

// Limit is what a tensor must meet: relative L2 and, when MaxAbs > 0, max |diff|; an ULP
// limit (> 0) replaces both; Exact asks for bit-equal values.
type Limit struct {
	RelL2  float64
	MaxAbs float64
	ULP    int64
	Exact  bool
}

// String is the limit as the parity tables print it.
func (l Limit) String() string {
	switch {
	case l.Exact:
		return "exact"
	case l.ULP > 0:
		return fmt.Sprintf("<= %d ulp", l.ULP)
	case l.MaxAbs > 0:
		return fmt.Sprintf("rel L2 <= %.0e, max <= %.0e", l.RelL2, l.MaxAbs)
	}
	return fmt.Sprintf("rel L2 <= %.0e", l.RelL2)
}

// Met reports whether measured distances meet the limit (NaN never does). Exact limits
// need the values themselves and are left to the caller.
func (l Limit) Met(relL2, maxAbs float64, maxULP int64) bool {
	if math.IsNaN(relL2) || math.IsNaN(maxAbs) {
		return false
	}
	if l.ULP > 0 {
		return maxULP <= l.ULP
	}
	return relL2 <= l.RelL2 && (l.MaxAbs == 0 || maxAbs <= l.MaxAbs)
}

// MaxULP is the largest distance between a[i] and b[i] in float32 units in the last place.
func MaxULP(a, b []float32) int64 {
	var m int64
	for i := range a {
		m = max(m, ULPs(a[i], b[i]))
	}
	return m
}

// ULPs is the distance between a and b in float32 units in the last place.
func ULPs(a, b float32) int64 {
	d := ordered(a) - ordered(b)
	if d < 0 {
		return -d
	}
	return d
}

// ordered maps float32 bits onto integers in the order of the floats (+0 and -0 both 0).
func ordered(f float32) int64 {
	u := int64(math.Float32bits(f))
	if u&(1<<31) != 0 {
		return -(u & 0x7fffffff)
	}
	return u
}

// WriteJSON writes v (a report) to path as indented JSON.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
