package backendspec_test

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// A host with one GPU and JAX's CUDA plugin installed by pip: the automatic choice is the
// XLA backend on that plugin, with the offline settings it needs.
func ExampleResolve() {
	files := map[string]bool{
		"/dev/nvidia0": true,
		"/opt/torch/.venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so":  true,
		"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/nvvm/libdevice/libdevice.10.bc": true,
		"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13":            true,
		"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9":             true,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":                                                   true,
	}
	p := backendspec.Probe{
		LookupEnv: func(string) (string, bool) { return "", false },
		Glob: func(pattern string) (out []string, err error) {
			for f := range files {
				if ok, _ := filepath.Match(pattern, f); ok {
					out = append(out, f)
				}
			}
			return out, nil
		},
		IsFile:    func(f string) bool { return files[f] },
		NvidiaSMI: func() (string, error) { return "", errors.New("not needed") },
	}
	r, err := backendspec.Resolve("", p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Source, r.Kind)
	fmt.Println(r.Config)
	for _, e := range r.Env {
		fmt.Printf("%s=%s\n", e.Name, e.Value)
	}
	fmt.Println(r.Options)
	// Output:
	// auto xla
	// xla:/opt/torch/.venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so
	// GOMLX_NO_AUTO_INSTALL=1
	// GOMLX_BACKEND=xla:/opt/torch/.venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so
	// XLA_FLAGS=--xla_gpu_cuda_data_dir=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13
	// GOPJRT_CUDA_CHECKS=0
	// map[preallocate:false]
}
