package backendspec

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeHost is an in-memory host: a set of files, environment variables and what
// nvidia-smi -L prints (smiErr when it fails).
type fakeHost struct {
	files  []string
	env    map[string]string
	smi    string
	smiErr error
}

func (h fakeHost) probe() Probe {
	return Probe{
		LookupEnv: func(n string) (string, bool) { v, ok := h.env[n]; return v, ok },
		Glob: func(pattern string) ([]string, error) {
			var out []string
			for _, f := range h.files {
				ok, err := filepath.Match(pattern, f)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, f)
				}
			}
			return out, nil
		},
		IsFile:    func(p string) bool { return slices.Contains(h.files, p) },
		NvidiaSMI: func() (string, error) { return h.smi, h.smiErr },
		Home:      "/home/u",
		Cwd:       "/work",
	}
}

const (
	jaxPlugin   = "/opt/torch/.venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so"
	jaxPlugin12 = "/opt/torch/.venv/lib/python3.12/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so"
	pipCU13     = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13"
	goxlaPlugin = "/home/u/.local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so"
)

var (
	errNoSMI  = errors.New("exec: \"nvidia-smi\": executable file not found in $PATH")
	gpuFiles  = []string{"/dev/nvidia0", "/dev/nvidiactl"}
	pipLibs   = []string{pipCU13 + "/lib/libcublas.so.13", "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
	libdevPip = pipCU13 + "/nvvm/libdevice/libdevice.10.bc"
)

func files(groups ...[]string) []string { return slices.Concat(groups...) }

func envValue(r Resolution, name string) (string, bool) {
	for _, e := range r.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name       string
		spec       string
		host       fakeHost
		wantErr    error
		wantKind   Kind
		wantConfig string
		wantSource string
		wantData   string // CUDADataDir
		wantFlags  string // XLA_FLAGS set by Env ("" = not set)
		wantWarn   string // substring of some warning
	}{
		{name: "auto without GPU is go", host: fakeHost{smiErr: errNoSMI},
			wantKind: KindGo, wantConfig: "go", wantSource: "auto"},
		{name: "nvidiactl alone is no GPU", host: fakeHost{files: []string{"/dev/nvidiactl", jaxPlugin}, smiErr: errNoSMI},
			wantKind: KindGo, wantConfig: "go", wantSource: "auto"},
		{name: "auto with GPU but no plugin is go", host: fakeHost{files: gpuFiles},
			wantKind: KindGo, wantConfig: "go", wantSource: "auto"},
		{name: "auto with GPU and pip plugin is xla", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin, jaxPlugin12, libdevPip}, pipLibs)},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantSource: "auto", wantData: pipCU13,
			wantFlags: "--xla_gpu_cuda_data_dir=" + pipCU13},
		{name: "auto sees GPU through nvidia-smi", host: fakeHost{files: files([]string{jaxPlugin, libdevPip}, pipLibs), smi: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n"},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantSource: "auto", wantData: pipCU13},
		{name: "GOMLX_BACKEND overrides auto", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin}), env: map[string]string{"GOMLX_BACKEND": "go"}},
			wantKind: KindGo, wantConfig: "go", wantSource: "GOMLX_BACKEND"},
		{name: "go with simplego options", host: fakeHost{env: map[string]string{"GOMLX_BACKEND": "go:ops_sequential"}},
			wantKind: KindGo, wantConfig: "go:ops_sequential", wantSource: "GOMLX_BACKEND"},
		{name: "go with two simplego options", spec: "go:parallelism=2,dotgeneral_large", host: fakeHost{},
			wantKind: KindGo, wantConfig: "go:parallelism=2,dotgeneral_large", wantSource: "flag"},
		{name: "flag overrides GOMLX_BACKEND", spec: "simplego", host: fakeHost{env: map[string]string{"GOMLX_BACKEND": "xla:cuda"}},
			wantKind: KindGo, wantConfig: "go", wantSource: "flag"},
		{name: "xla:cuda without GPU", spec: "xla:cuda", host: fakeHost{files: []string{jaxPlugin}, smiErr: errNoSMI}, wantErr: ErrNoGPU},
		{name: "xla:cuda without plugin", spec: "xla:cuda", host: fakeHost{files: gpuFiles}, wantErr: ErrNoPlugin},
		{name: "xla:cuda prefers PJRT_PLUGIN_LIBRARY_PATH", spec: "xla:cuda",
			host: fakeHost{files: files(gpuFiles, []string{"/plug/pjrt_c_api_cuda_plugin.so", jaxPlugin}, pipLibs),
				env: map[string]string{"PJRT_PLUGIN_LIBRARY_PATH": "/nothing:/plug", "CUDA_HOME": "/cuda"}},
			wantKind: KindXLA, wantConfig: "xla:/plug/pjrt_c_api_cuda_plugin.so", wantSource: "flag",
			wantWarn: "no CUDA data folder"},
		{name: "go-xla install layout", spec: "cuda",
			host: fakeHost{files: files(gpuFiles, []string{goxlaPlugin, "/home/u/.local/lib/go-xla/nvidia/cu13/nvvm/libdevice/libdevice.10.bc",
				"/home/u/.local/lib/go-xla/nvidia/cu13/lib/libcublas.so.13", "/home/u/.local/lib/go-xla/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib64/libcuda.so.1"})},
			wantKind: KindXLA, wantConfig: "xla:" + goxlaPlugin, wantSource: "flag", wantData: "/home/u/.local/lib/go-xla/nvidia/cu13"},
		{name: "CUDA_HOME as data folder", spec: "xla:cuda",
			host:     fakeHost{files: files(gpuFiles, []string{jaxPlugin, "/cuda/nvvm/libdevice/libdevice.10.bc"}, pipLibs), env: map[string]string{"CUDA_HOME": "/cuda"}},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantData: "/cuda", wantSource: "flag",
			wantFlags: "--xla_gpu_cuda_data_dir=/cuda"},
		{name: "existing XLA_FLAGS data dir is kept", spec: "xla:cuda",
			host:     fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip}, pipLibs), env: map[string]string{"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/mine --foo"}},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantData: "/mine", wantSource: "flag"},
		{name: "other XLA_FLAGS are extended", spec: "xla:cuda",
			host:     fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip}, pipLibs), env: map[string]string{"XLA_FLAGS": "--xla_dump_to=/tmp/d"}},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantData: pipCU13, wantSource: "flag",
			wantFlags: "--xla_dump_to=/tmp/d --xla_gpu_cuda_data_dir=" + pipCU13},
		{name: "missing libraries warn", spec: "xla:cuda", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip})},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin, wantData: pipCU13, wantSource: "flag", wantWarn: "libcudnn.so*"},
		{name: "plugin path keeps options", spec: "xla:" + jaxPlugin + ",tf32", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip}, pipLibs)},
			wantKind: KindXLA, wantConfig: "xla:" + jaxPlugin + ",tf32", wantData: pipCU13, wantSource: "flag"},
		{name: "relative plugin path", spec: "xla:plug/xla_cuda_plugin.so", host: fakeHost{files: files(gpuFiles, []string{"/work/plug/xla_cuda_plugin.so"}, pipLibs)},
			wantKind: KindXLA, wantConfig: "xla:/work/plug/xla_cuda_plugin.so", wantSource: "flag", wantWarn: "no CUDA data folder"},
		{name: "missing plugin file", spec: "xla:/no/such.so", host: fakeHost{files: gpuFiles}, wantErr: ErrNoPlugin},
		{name: "named plugin passes through", spec: "xla:cpu", host: fakeHost{},
			wantKind: KindXLA, wantConfig: "xla:cpu", wantSource: "flag"},
		{name: "bare xla passes through", spec: "xla", host: fakeHost{},
			wantKind: KindXLA, wantConfig: "xla", wantSource: "flag"},
		{name: "unknown", spec: "tpu", host: fakeHost{}, wantErr: ErrUnknownBackend},
		{name: "unknown from env", host: fakeHost{env: map[string]string{"GOMLX_BACKEND": "metal"}}, wantErr: ErrUnknownBackend},
		{name: "bad preallocate", spec: "xla:cuda", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin}), env: map[string]string{"VDPP_XLA_PREALLOCATE": "maybe"}}, wantErr: ErrBadSetting},
		{name: "bad fraction", spec: "xla:cuda", host: fakeHost{files: files(gpuFiles, []string{jaxPlugin}), env: map[string]string{"VDPP_XLA_MEM_FRACTION": "1.5"}}, wantErr: ErrBadSetting},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Resolve(tc.spec, tc.host.probe())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if r.Kind != tc.wantKind || r.Config != tc.wantConfig || r.Source != tc.wantSource {
				t.Fatalf("got kind %v config %q source %q, want %v %q %q", r.Kind, r.Config, r.Source, tc.wantKind, tc.wantConfig, tc.wantSource)
			}
			if r.CUDADataDir != tc.wantData {
				t.Errorf("CUDADataDir = %q, want %q", r.CUDADataDir, tc.wantData)
			}
			flags, set := envValue(r, "XLA_FLAGS")
			if tc.wantFlags != "" && flags != tc.wantFlags {
				t.Errorf("XLA_FLAGS = %q (set %v), want %q", flags, set, tc.wantFlags)
			}
			if tc.wantWarn != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.wantWarn) {
				t.Errorf("warnings %q lack %q", r.Warnings, tc.wantWarn)
			}
			if tc.wantWarn == "" && len(r.Warnings) > 0 {
				t.Errorf("unexpected warnings %q", r.Warnings)
			}
			if r.Kind == KindGo && len(r.Env) != 0 {
				t.Errorf("go backend sets env %v", r.Env)
			}
			if r.Kind == KindXLA {
				if v, _ := envValue(r, "GOMLX_NO_AUTO_INSTALL"); v != "1" {
					t.Errorf("GOMLX_NO_AUTO_INSTALL not set: %v", r.Env)
				}
				if v, _ := envValue(r, "GOMLX_BACKEND"); v != r.Config {
					t.Errorf("GOMLX_BACKEND = %q, want %q", v, r.Config)
				}
			}
			if r.CUDA && r.Options["preallocate"] != false {
				t.Errorf("CUDA options %v: want preallocate=false", r.Options)
			}
		})
	}
}

func TestResolveAutoReason(t *testing.T) {
	r, err := Resolve("", fakeHost{files: gpuFiles}.probe())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Reason, "no CUDA PJRT plugin") || len(r.Searched) == 0 {
		t.Errorf("reason %q, searched %v: want the missing plugin named", r.Reason, r.Searched)
	}
	_, err = Resolve("xla:cuda", fakeHost{files: gpuFiles}.probe())
	for _, want := range []string{"pjrt_c_api_cuda_plugin.so", "jax_plugins/xla_cuda*/xla_cuda_plugin.so", "pip install"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestMemoryOptions(t *testing.T) {
	h := fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip}, pipLibs),
		env: map[string]string{"VDPP_XLA_PREALLOCATE": "true", "VDPP_XLA_MEM_FRACTION": "0.45"}}
	r, err := Resolve("xla:cuda", h.probe())
	if err != nil {
		t.Fatal(err)
	}
	if r.Options["preallocate"] != true || r.Options["memory_fraction"] != float32(0.45) {
		t.Errorf("options %v", r.Options)
	}
}

func TestApplyAndHint(t *testing.T) {
	r, err := Resolve("xla:cuda", fakeHost{files: files(gpuFiles, []string{jaxPlugin, libdevPip})}.probe())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := r.Apply(func(k, v string) error { got[k] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	if got["GOMLX_NO_AUTO_INSTALL"] != "1" || got["XLA_FLAGS"] != "--xla_gpu_cuda_data_dir="+pipCU13 || got["GOMLX_BACKEND"] != "xla:"+jaxPlugin {
		t.Errorf("applied %v", got)
	}
	boom := errors.New("libcudnn.so.9: cannot open shared object file")
	h := r.Hint(boom)
	if !errors.Is(h, boom) || !strings.Contains(h.Error(), "libcudnn.so*") || !strings.Contains(h.Error(), pipCU13) {
		t.Errorf("hint %v", h)
	}
	if g, _ := Resolve("go", fakeHost{}.probe()); g.Hint(boom) != boom {
		t.Errorf("go backend hint should return the error unchanged")
	}
	failing := func(string, string) error { return errors.New("nope") }
	if err := r.Apply(failing); err == nil {
		t.Errorf("Apply ignored a setenv failure")
	}
}

func TestDetectGPU(t *testing.T) {
	cases := []struct {
		name string
		host fakeHost
		want bool
	}{
		{"device file", fakeHost{files: []string{"/dev/nvidia3"}}, true},
		{"smi lists a GPU", fakeHost{smi: "GPU 0: NVIDIA H200 (UUID: x)"}, true},
		{"smi lists none", fakeHost{smi: "No devices were found"}, false},
		{"smi missing", fakeHost{smiErr: errNoSMI}, false},
	}
	for _, tc := range cases {
		if g := DetectGPU(tc.host.probe()); g.Found != tc.want || g.Evidence == "" {
			t.Errorf("%s: got %+v, want found=%v with evidence", tc.name, g, tc.want)
		}
	}
}

// TestResolveKernels: the kernels= option of a go backend, its $VDPP_KERNELS default and
// the default of all kernels; XLA gets none.
func TestResolveKernels(t *testing.T) {
	gemmOps := Kernels{GEMM: true, Ops: true}
	for _, tc := range []struct {
		name, spec string
		env        map[string]string
		want       Kernels
		wantConfig string
		wantErr    string
	}{
		{name: "default", spec: "go", want: KernelsOn, wantConfig: "go"},
		{name: "auto", want: KernelsOn, wantConfig: "go"},
		{name: "option", spec: "go:kernels=gemm", want: KernelsGEMM, wantConfig: "go"},
		{name: "option among simplego's", spec: "go:parallelism=2,kernels=off,dotgeneral_large", want: KernelsOff, wantConfig: "go:parallelism=2,dotgeneral_large"},
		{name: "parts", spec: "go,kernels=gemm+ops", want: gemmOps, wantConfig: "go"},
		{name: "environment", spec: "go", env: map[string]string{KernelsEnv: "off"}, want: KernelsOff, wantConfig: "go"},
		{name: "environment on auto", env: map[string]string{KernelsEnv: "gemm"}, want: KernelsGEMM, wantConfig: "go"},
		{name: "environment through GOMLX_BACKEND", env: map[string]string{"GOMLX_BACKEND": "go:kernels=gemm+ops"}, want: gemmOps, wantConfig: "go"},
		{name: "option over environment", spec: "go:kernels=on", env: map[string]string{KernelsEnv: "off"}, want: KernelsOn, wantConfig: "go"},
		{name: "xla has none", spec: "xla:cpu", env: map[string]string{KernelsEnv: "on"}, want: KernelsOff, wantConfig: "xla:cpu"},
		{name: "bad option", spec: "go:kernels=fast", wantErr: `--backend: backendspec: bad setting: kernels "fast"`},
		{name: "bad environment", spec: "go", env: map[string]string{KernelsEnv: "yes"}, wantErr: `VDPP_KERNELS: backendspec: bad setting: kernels "yes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Resolve(tc.spec, fakeHost{env: tc.env, smiErr: errNoSMI}.probe())
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.Is(err, ErrBadSetting) {
					t.Fatalf("err = %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil || r.Kernels != tc.want || r.Config != tc.wantConfig {
				t.Fatalf("Resolve(%q) = kernels %+v config %q, %v; want %+v, %q", tc.spec, r.Kernels, r.Config, err, tc.want, tc.wantConfig)
			}
		})
	}
}

// TestKernelsString: String gives back the value ParseKernels reads.
func TestKernelsString(t *testing.T) {
	for _, k := range []Kernels{KernelsOn, KernelsOff, KernelsGEMM, {Ops: true}, {GEMM: true, Fused: true}, {Ops: true, Fused: true}} {
		got, err := ParseKernels(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKernels(%q) = %+v, %v; want %+v", k.String(), got, err, k)
		}
	}
}
