package backendspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Sentinel errors of Resolve (match with errors.Is).
var (
	// ErrUnknownBackend: the spec names no backend vdpp knows.
	ErrUnknownBackend = errors.New("backendspec: unknown backend")
	// ErrNoGPU: "xla:cuda" was asked for on a host with no NVIDIA GPU.
	ErrNoGPU = errors.New("backendspec: no NVIDIA GPU found")
	// ErrNoPlugin: the CUDA PJRT plugin (or the plugin file named) was not found.
	ErrNoPlugin = errors.New("backendspec: PJRT plugin not found")
	// ErrBadSetting: a VDPP_XLA_* variable does not parse.
	ErrBadSetting = errors.New("backendspec: bad setting")
)

// Kind is the family of a resolved backend.
type Kind int

const (
	// KindGo is GoMLX's pure-Go simplego backend.
	KindGo Kind = iota
	// KindXLA is GoMLX's XLA backend on a PJRT plugin.
	KindXLA
)

// String names the kind.
func (k Kind) String() string {
	if k == KindXLA {
		return "xla"
	}
	return "go"
}

// EnvVar is one environment setting.
type EnvVar struct{ Name, Value string }

// Resolution is the backend vdpp will create for a spec, and what it needs.
type Resolution struct {
	Spec   string // the spec asked for ("" = automatic)
	Source string // where the effective spec came from: "flag", "GOMLX_BACKEND" or "auto"
	Reason string // for automatic choices, why this one
	Kind   Kind
	// Config is what GoMLX's backends.NewWithConfig understands: "go", "xla:/abs/plugin.so",
	// "xla:cpu", possibly followed by ",options".
	Config string
	// Kernels are vdpp's CPU kernels a go backend runs: the spec's kernels= option, else
	// $VDPP_KERNELS, else all of them (zero for XLA).
	Kernels Kernels
	// Plugin is the plugin's absolute path (or the name GoMLX searches for) for XLA.
	Plugin string
	// PluginOptions are GoMLX's options after the comma in the spec ("tf32", ...).
	PluginOptions []string
	// CUDA reports whether Plugin is a CUDA plugin.
	CUDA bool
	GPU  GPU
	// CUDADataDir is the folder given to XLA as --xla_gpu_cuda_data_dir ("" if none).
	CUDADataDir string
	// Env must be set (Apply) before the backend is created.
	Env []EnvVar
	// Options are the PJRT client options for the plugin (CUDA: preallocate,
	// memory_fraction).
	Options map[string]any
	// Warnings are problems found that may or may not stop the plugin from loading.
	Warnings []string
	// Searched lists the places looked at for the plugin.
	Searched []string
}

// Resolve decides which backend spec means on the host p describes. See the package doc
// for the accepted forms.
func Resolve(spec string, p Probe) (Resolution, error) {
	r := Resolution{Spec: spec, Source: "flag"}
	eff := strings.TrimSpace(spec)
	if eff == "" {
		if env := strings.TrimSpace(p.getenv("GOMLX_BACKEND")); env != "" {
			eff, r.Source = env, "GOMLX_BACKEND"
		} else {
			return resolveAuto(r, p)
		}
	}
	base, opts, _ := strings.Cut(eff, ",")
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			if o != "" {
				r.PluginOptions = append(r.PluginOptions, o)
			}
		}
	}
	switch {
	case base == "go" || base == "simplego" || strings.HasPrefix(base, "go:"):
		// simplego's own options (go:parallelism=N,dotgeneral_large, ...) pass through;
		// kernels=K is vdpp's.
		all := r.PluginOptions
		if o, ok := strings.CutPrefix(base, "go:"); ok && o != "" {
			all = append([]string{o}, all...)
		}
		k, goOpts, err := goKernels(p, all)
		if err != nil {
			return r, err
		}
		r.Kind, r.Config, r.PluginOptions, r.Kernels = KindGo, "go", nil, k
		if len(goOpts) > 0 {
			r.Config = "go:" + strings.Join(goOpts, ",")
		}
		return r, nil
	case base == "xla:cuda" || base == "cuda":
		return resolveCUDA(r, p)
	case base == "xla":
		return finishXLA(r, p, "")
	case strings.HasPrefix(base, "xla:"):
		name := strings.TrimPrefix(base, "xla:")
		if strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".so") {
			return resolvePluginFile(r, p, name)
		}
		return finishXLA(r, p, name)
	}
	return r, fmt.Errorf("%w %q from %s: want go, xla:cuda, xla:/path/to/plugin.so or xla:NAME", ErrUnknownBackend, eff, r.Source)
}

// goKernels splits the kernels= option off a go backend's options and parses it, or
// $VDPP_KERNELS when the options have none.
func goKernels(p Probe, opts []string) (Kernels, []string, error) {
	v, from := p.getenv(KernelsEnv), KernelsEnv
	var rest []string
	for _, o := range opts {
		if k, ok := strings.CutPrefix(o, "kernels="); ok {
			v, from = k, "--backend"
		} else {
			rest = append(rest, o)
		}
	}
	k, err := ParseKernels(v)
	if err != nil {
		return k, nil, fmt.Errorf("%s: %w", from, err)
	}
	return k, rest, nil
}

// resolveAuto picks xla:cuda when both a GPU and a CUDA plugin are present, else go.
func resolveAuto(r Resolution, p Probe) (Resolution, error) {
	r.Source = "auto"
	r.GPU = DetectGPU(p)
	k, _, err := goKernels(p, nil)
	if err != nil {
		return r, err
	}
	if !r.GPU.Found {
		r.Kind, r.Config, r.Kernels = KindGo, "go", k
		r.Reason = "no NVIDIA GPU (" + r.GPU.Evidence + ")"
		return r, nil
	}
	plugin, searched := FindCUDAPlugin(p)
	if plugin == "" {
		r.Kind, r.Config, r.Searched, r.Kernels = KindGo, "go", searched, k
		r.Reason = "NVIDIA GPU found (" + r.GPU.Evidence + ") but no CUDA PJRT plugin; " + installHint
		return r, nil
	}
	r.Reason = "NVIDIA GPU found (" + r.GPU.Evidence + ") and a CUDA PJRT plugin"
	r.Searched = searched
	return finishXLA(r, p, plugin)
}

// installHint says how to get a CUDA plugin.
const installHint = "install one with `pip install \"jax[cuda13]\"` (or jax-cuda13-plugin), " +
	"point $PJRT_PLUGIN_LIBRARY_PATH at the folder holding pjrt_c_api_cuda_plugin.so, " +
	"or pass --backend xla:/abs/path/to/xla_cuda_plugin.so"

// resolveCUDA finds the CUDA plugin for "xla:cuda".
func resolveCUDA(r Resolution, p Probe) (Resolution, error) {
	r.GPU = DetectGPU(p)
	if !r.GPU.Found {
		return r, fmt.Errorf("%w for --backend xla:cuda: %s; use --backend go where there is no GPU", ErrNoGPU, r.GPU.Evidence)
	}
	plugin, searched := FindCUDAPlugin(p)
	r.Searched = searched
	if plugin == "" {
		return r, fmt.Errorf("%w: no CUDA PJRT plugin (looked for %s); %s", ErrNoPlugin, strings.Join(searched, ", "), installHint)
	}
	return finishXLA(r, p, plugin)
}

// resolvePluginFile checks a plugin given by path.
func resolvePluginFile(r Resolution, p Probe, path string) (Resolution, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.Cwd, path)
	}
	r.Searched = []string{path}
	if !p.IsFile(path) {
		return r, fmt.Errorf("%w: %s is not a file; %s", ErrNoPlugin, path, installHint)
	}
	if IsCUDAPlugin(path) {
		r.GPU = DetectGPU(p)
		if !r.GPU.Found {
			r.Warnings = append(r.Warnings, "CUDA plugin given but no NVIDIA GPU seen ("+r.GPU.Evidence+")")
		}
	}
	return finishXLA(r, p, path)
}

// IsCUDAPlugin reports whether a plugin name or path is NVIDIA's (go-xla's rule: the name
// mentions cuda or nvidia).
func IsCUDAPlugin(name string) bool {
	u := strings.ToLower(filepath.Base(name))
	return strings.Contains(u, "cuda") || strings.Contains(u, "nvidia")
}

// finishXLA fills in the configuration and the settings of an XLA backend on plugin (an
// absolute path, a plugin name, or "" for GoMLX's own choice).
func finishXLA(r Resolution, p Probe, plugin string) (Resolution, error) {
	r.Kind, r.Plugin = KindXLA, plugin
	r.Config = "xla"
	if plugin != "" {
		r.Config = "xla:" + plugin
	}
	if len(r.PluginOptions) > 0 {
		r.Config += "," + strings.Join(r.PluginOptions, ",")
	}
	r.Env = append(r.Env, EnvVar{"GOMLX_NO_AUTO_INSTALL", "1"}, EnvVar{"GOMLX_BACKEND", r.Config})
	if plugin != "" && filepath.IsAbs(plugin) && IsCUDAPlugin(plugin) {
		r.CUDA = true
		if err := cudaSettings(&r, p); err != nil {
			return r, err
		}
	}
	return r, nil
}

// cudaSettings adds XLA_FLAGS, the PJRT client options and the library warnings of a CUDA
// plugin.
func cudaSettings(r *Resolution, p Probe) error {
	flags := p.getenv("XLA_FLAGS")
	if strings.Contains(flags, "--xla_gpu_cuda_data_dir") {
		for _, f := range strings.Fields(flags) {
			if v, ok := strings.CutPrefix(f, "--xla_gpu_cuda_data_dir="); ok {
				r.CUDADataDir = v
			}
		}
	} else {
		dir, tried := FindCUDADataDir(p, r.Plugin)
		if dir == "" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("no CUDA data folder with %s (tried %s): XLA may fail to compile GPU kernels; "+
				"install nvidia-cuda-nvcc (pip) or the CUDA toolkit, or set XLA_FLAGS=--xla_gpu_cuda_data_dir=DIR",
				libdevice, strings.Join(tried, ", ")))
		} else {
			r.CUDADataDir = dir
			flags = strings.TrimSpace(flags + " --xla_gpu_cuda_data_dir=" + dir)
			r.Env = append(r.Env, EnvVar{"XLA_FLAGS", flags},
				// go-xla's own check would otherwise warn about a missing ../nvidia folder.
				EnvVar{"GOPJRT_CUDA_CHECKS", "0"})
		}
	}
	if missing, searched := MissingCUDALibs(p, r.Plugin); len(missing) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("CUDA libraries %s not found in %s: the plugin may still find them through its RPATH; "+
			"if it fails to load, install the pip packages nvidia-cublas and nvidia-cudnn-cu13 beside it or add their lib folders to LD_LIBRARY_PATH",
			strings.Join(missing, ", "), strings.Join(searched, ", ")))
	}
	r.Options = map[string]any{"preallocate": false}
	if v := p.getenv("VDPP_XLA_PREALLOCATE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: VDPP_XLA_PREALLOCATE=%q: %v", ErrBadSetting, v, err)
		}
		r.Options["preallocate"] = b
	}
	if v := p.getenv("VDPP_XLA_MEM_FRACTION"); v != "" {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || f <= 0 || f > 1 {
			return fmt.Errorf("%w: VDPP_XLA_MEM_FRACTION=%q: want a number in (0, 1]", ErrBadSetting, v)
		}
		r.Options["memory_fraction"] = float32(f)
	}
	return nil
}

// Apply sets r.Env with setenv (os.Setenv), in order.
func (r Resolution) Apply(setenv func(name, value string) error) error {
	for _, e := range r.Env {
		if err := setenv(e.Name, e.Value); err != nil {
			return fmt.Errorf("backendspec: set %s: %w", e.Name, err)
		}
	}
	return nil
}

// Hint wraps err, a failure to create r's backend, with what was looked for and how to
// fix it. It returns err unchanged for the go backend.
func (r Resolution) Hint(err error) error {
	if err == nil || r.Kind != KindXLA {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "XLA backend %q (from %s) failed to start", r.Config, r.Source)
	if r.CUDA {
		fmt.Fprintf(&b, "; CUDA data folder %q", r.CUDADataDir)
	}
	for _, w := range r.Warnings {
		b.WriteString("; ")
		b.WriteString(w)
	}
	if r.CUDA {
		b.WriteString("; check `vdpp doctor`, or run with --backend go")
	}
	return fmt.Errorf("%s: %w", b.String(), err)
}
