//go:build !(((linux && amd64) || darwin) && !noxla)

package nn

import (
	"errors"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// ErrNoXLA is returned for an XLA spec by a vdpp built without GoMLX's XLA backend (the
// noxla build tag, or a platform go-xla does not support).
var ErrNoXLA = errors.New("nn: this vdpp was built without the XLA backend (noxla tag or unsupported platform); use --backend go")

func newXLA(backendspec.Resolution) (backends.Backend, error) { return nil, ErrNoXLA }

// CompiledBackends lists the GoMLX backends built into this binary: the pure-Go one only.
func CompiledBackends() []string { return []string{"go"} }
