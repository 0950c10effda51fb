package backendspec

import (
	"path/filepath"
	"sort"
	"strings"
)

// GPU is what was learned about NVIDIA GPUs on the host.
type GPU struct {
	Found    bool
	Evidence string // "/dev/nvidia0", "nvidia-smi: GPU 0: NVIDIA H100 ...", or why not
}

// DetectGPU looks for NVIDIA device files (/dev/nvidia0, /dev/nvidia1, ...), then asks
// nvidia-smi -L. /dev/nvidiactl alone is not a GPU (containers often have it without one).
func DetectGPU(p Probe) GPU {
	if devs := p.glob("/dev/nvidia[0-9]*"); len(devs) > 0 {
		sort.Strings(devs)
		return GPU{Found: true, Evidence: strings.Join(devs, ", ")}
	}
	out, err := p.NvidiaSMI()
	if err != nil {
		return GPU{Evidence: "no /dev/nvidia[0-9]* device files and nvidia-smi failed: " + firstLine(err.Error())}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "GPU ") {
			return GPU{Found: true, Evidence: "nvidia-smi: " + strings.TrimSpace(line)}
		}
	}
	return GPU{Evidence: "no /dev/nvidia[0-9]* device files and nvidia-smi -L lists no GPU"}
}

// pluginFileNames are the file names a CUDA PJRT plugin has: go-xla's installer and
// naming convention, and JAX's pip package jax-cuda1x-plugin.
var pluginFileNames = []string{"pjrt_c_api_cuda_plugin.so", "xla_cuda_plugin.so"}

// knownVenvs are Python environments known to hold JAX's CUDA plugin on machines vdpp runs
// on (/opt/torch/.venv is where a PyTorch GPU image keeps its packages).
var knownVenvs = []string{"/opt/torch/.venv", "/opt/venv", "/usr/local", "/usr"}

// sitePackages lists the Python package folders to search, most specific first:
// $PYTHONPATH entries, $VIRTUAL_ENV, ~/.local and the known environments.
func sitePackages(p Probe) []string {
	var patterns []string
	for _, d := range filepath.SplitList(p.getenv("PYTHONPATH")) {
		if d != "" {
			patterns = append(patterns, d)
		}
	}
	prefixes := []string{}
	if v := p.getenv("VIRTUAL_ENV"); v != "" {
		prefixes = append(prefixes, v)
	}
	if p.Home != "" {
		prefixes = append(prefixes, filepath.Join(p.Home, ".local"))
	}
	prefixes = append(prefixes, knownVenvs...)
	for _, pre := range prefixes {
		patterns = append(patterns,
			filepath.Join(pre, "lib", "python3*", "site-packages"),
			filepath.Join(pre, "lib", "python3*", "dist-packages"))
	}
	patterns = append(patterns, "/usr/lib/python3/dist-packages")
	return patterns
}

// FindCUDAPlugin searches for a CUDA PJRT plugin: in $PJRT_PLUGIN_LIBRARY_PATH's folders,
// go-xla's install folders (~/.local/lib/go-xla, /usr/local/lib/go-xla, each with its
// nvidia/ subfolder), then pip-installed JAX plugins (jax_plugins/xla_cuda*/
// xla_cuda_plugin.so, the newest CUDA major first) in the Python package folders. It
// returns the first plugin file found ("" if none) and every place it looked.
func FindCUDAPlugin(p Probe) (path string, searched []string) {
	var dirs []string
	for _, d := range filepath.SplitList(p.getenv("PJRT_PLUGIN_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	var goxla []string
	if p.Home != "" {
		goxla = append(goxla, filepath.Join(p.Home, ".local", "lib", "go-xla"))
	}
	goxla = append(goxla, "/usr/local/lib/go-xla")
	for _, d := range goxla {
		dirs = append(dirs, d, filepath.Join(d, "nvidia"))
	}
	for _, d := range dirs {
		for _, name := range pluginFileNames {
			f := filepath.Join(d, name)
			searched = append(searched, f)
			if p.IsFile(f) {
				return f, searched
			}
		}
	}
	for _, site := range sitePackages(p) {
		pattern := filepath.Join(site, "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so")
		searched = append(searched, pattern)
		matches := p.glob(pattern)
		sort.Sort(sort.Reverse(sort.StringSlice(matches))) // xla_cuda13 before xla_cuda12
		for _, m := range matches {
			if p.IsFile(m) {
				return m, searched
			}
		}
	}
	return "", searched
}

// libdevice is the file XLA needs under its CUDA data folder to compile GPU kernels.
var libdevice = filepath.Join("nvvm", "libdevice", "libdevice.10.bc")

// cudaDataDirCandidates lists, in order, the folders that may serve as XLA's CUDA data
// folder for a plugin at plugin: next to a go-xla install (its nvidia/ folder holds
// cu13/ and bin/ptxas), the pip "nvidia" package folder beside jax_plugins, then
// $CUDA_HOME, $CUDA_PATH and /usr/local/cuda.
func cudaDataDirCandidates(p Probe, plugin string) []string {
	var roots []string
	if plugin != "" {
		dir := filepath.Dir(plugin)
		roots = append(roots, dir, filepath.Join(dir, "nvidia"))
		if filepath.Base(filepath.Dir(dir)) == "jax_plugins" {
			roots = append(roots, filepath.Join(filepath.Dir(filepath.Dir(dir)), "nvidia"))
		}
	}
	var out []string
	for _, r := range roots {
		for _, sub := range []string{"cu13", "cu12", "cuda_nvcc", ""} {
			out = append(out, filepath.Join(r, sub))
		}
	}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := p.getenv(v); d != "" {
			out = append(out, d)
		}
	}
	return append(out, "/usr/local/cuda")
}

// FindCUDADataDir returns the first candidate folder holding nvvm/libdevice/libdevice.10.bc
// ("" if none) and the candidates tried.
func FindCUDADataDir(p Probe, plugin string) (dir string, tried []string) {
	tried = cudaDataDirCandidates(p, plugin)
	for _, d := range tried {
		if p.IsFile(filepath.Join(d, libdevice)) {
			return d, tried
		}
	}
	return "", tried
}

// cudaLibs are libraries the CUDA plugin loads at start: the driver, cuBLAS and cuDNN.
var cudaLibs = []string{"libcuda.so.1", "libcublas.so*", "libcudnn.so*"}

// MissingCUDALibs returns which of the driver, cuBLAS and cuDNN libraries were not found in
// $LD_LIBRARY_PATH, the pip nvidia folders beside the plugin, the CUDA toolkit and the
// system library folders, with the folders searched. The plugin may still find them
// through its own RPATH: this is a warning, not a verdict.
func MissingCUDALibs(p Probe, plugin string) (missing, searched []string) {
	for _, d := range filepath.SplitList(p.getenv("LD_LIBRARY_PATH")) {
		if d != "" {
			searched = append(searched, d)
		}
	}
	if plugin != "" {
		dir := filepath.Dir(plugin)
		searched = append(searched, filepath.Join(dir, "*", "lib"), filepath.Join(dir, "nvidia", "*", "lib"))
		if filepath.Base(filepath.Dir(dir)) == "jax_plugins" {
			nv := filepath.Join(filepath.Dir(filepath.Dir(dir)), "nvidia")
			searched = append(searched, filepath.Join(nv, "*", "lib"))
		}
	}
	searched = append(searched, "/usr/local/cuda/lib64", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
		"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu")
	for _, lib := range cudaLibs {
		found := false
		for _, d := range searched {
			for _, m := range p.glob(filepath.Join(d, lib)) {
				if p.IsFile(m) {
					found = true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			missing = append(missing, lib)
		}
	}
	return missing, searched
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
