package nn

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	_ "github.com/gomlx/gomlx/backends/default" // registers simplego ("go") and xla
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// NewBackend returns a GoMLX backend for spec, resolved by backendspec.Resolve: "" means
// automatic ($GOMLX_BACKEND if set; otherwise the XLA backend on the CUDA PJRT plugin when
// an NVIDIA GPU and a plugin are both found; otherwise "go"), "go" the pure-Go simplego
// backend with vdpp's CPU kernels ("go:kernels=off" without them, see Kernels), "xla:cuda" the XLA backend on the CUDA plugin found on the host, and
// "xla:/abs/path/plugin.so" the XLA backend on that plugin. vdpp never auto-installs XLA
// plugins. Before creating an XLA backend it sets the environment the plugin needs
// (GOMLX_NO_AUTO_INSTALL, XLA_FLAGS with the CUDA data folder; see backendspec); a failure
// names what was looked for and how to fix it. Each call creates a new backend instance;
// share one instance between Weights and Programs that must work together.
func NewBackend(spec string) (backends.Backend, error) {
	r, err := backendspec.Resolve(spec, backendspec.OSProbe())
	if err != nil {
		return nil, fmt.Errorf("nn: backend %q: %w", spec, err)
	}
	return NewResolvedBackend(r)
}

// SimpleGoConfig is the configuration every simplego backend is created with. Ops run one
// after another ("ops_sequential"; DotGeneral still splits its batch over the worker pool):
// in GoMLX v0.26's parallel op scheduler every running op holds a worker slot, and a small
// DotGeneral waits for further slots without releasing its own, so a graph with
// 2·NumCPU independent DotGenerals in flight (the SVD UNet on a 2-core machine) deadlocks.
const SimpleGoConfig = "go:ops_sequential"

// simpleGoConfig returns SimpleGoConfig plus the options of a "go:OPTS" config (e.g.
// "go:dotgeneral_large"); "ops_parallel" among them replaces "ops_sequential". Options
// are applied in order, so the caller's come last.
func simpleGoConfig(config string) string {
	opts, ok := strings.CutPrefix(config, "go:")
	if !ok || opts == "" {
		return SimpleGoConfig
	}
	if strings.Contains(opts, "ops_parallel") {
		return "go:" + opts
	}
	return SimpleGoConfig + "," + opts
}

// envMu serialises the environment changes of concurrent NewResolvedBackend calls.
var envMu sync.Mutex

// NewResolvedBackend creates the backend r describes, after applying r.Env to the process
// environment. A simplego backend runs the CPU kernels r.Kernels selects (see Kernels).
func NewResolvedBackend(r backendspec.Resolution) (b backends.Backend, err error) {
	installGradients()
	var inner error
	err = catch(func() {
		if r.Kind != backendspec.KindXLA {
			if b, inner = backends.NewWithConfig(simpleGoConfig(r.Config)); inner == nil {
				enableKernels(b, r.Kernels)
			}
			return
		}
		envMu.Lock()
		defer envMu.Unlock()
		if inner = r.Apply(os.Setenv); inner != nil {
			return
		}
		b, inner = newXLA(r)
	})
	if err == nil {
		err = inner
	}
	if err != nil {
		return nil, fmt.Errorf("nn: backend %q: %w", r.Config, r.Hint(err))
	}
	return b, nil
}

// IsSimpleGo reports whether b is GoMLX's pure-Go backend.
func IsSimpleGo(b backends.Backend) bool {
	if _, ok := b.(*simplego.Backend); ok {
		return true
	}
	return strings.HasPrefix(b.Name(), "SimpleGo")
}

// catch runs fn and converts a panic (GoMLX's way of reporting graph-building errors) into
// an error; it returns nil when fn returns normally.
func catch(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	fn()
	return nil
}
