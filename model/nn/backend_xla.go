//go:build ((linux && amd64) || darwin) && !noxla

package nn

import (
	"strings"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// newXLA creates GoMLX's XLA backend for r with auto-install off (GOMLX_NO_AUTO_INSTALL is
// read only at program start, so it is switched off here too) and r's PJRT client options.
func newXLA(r backendspec.Resolution) (backends.Backend, error) {
	xla.EnableAutoInstall(false)
	cfg := strings.TrimPrefix(strings.TrimPrefix(r.Config, "xla"), ":")
	var opts pjrt.NamedValuesMap
	if len(r.Options) > 0 {
		opts = pjrt.NamedValuesMap(r.Options)
	}
	b, err := xla.NewWithOptions(cfg, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// CompiledBackends lists the GoMLX backends built into this binary: the pure-Go one and
// XLA (PJRT plugins, loaded at run time: CPU, CUDA).
func CompiledBackends() []string { return []string{"go", "xla"} }
