package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/nn"
)

func TestDoctor(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     string // substring of stdout
	}{
		{"go backend runs", []string{"doctor", "--backend", "go", "--try"}, 0, "try:             ok on SimpleGo"},
		{"fused ops ran", []string{"doctor", "--backend", "go:kernels=on", "--try"}, 0, "fused ops ran:   row norm\n"},
		{"kernels off", []string{"doctor", "--backend", "go:kernels=off"}, 0, "CPU kernels: go: simplego's matrix kernel (kernels=off)\n"},
		{"names the built-in backends", []string{"doctor", "--backend", "go"}, 0, "backends built in: " + strings.Join(nn.CompiledBackends(), ", ") + "; "},
		{"unknown backend fails", []string{"doctor", "--backend", "tpu"}, 1, "error: backendspec: unknown backend"},
		{"missing plugin file fails", []string{"doctor", "--backend", "xla:/no/such/xla_cuda_plugin.so"}, 1, "/no/such/xla_cuda_plugin.so is not a file"},
		{"bad flag", []string{"doctor", "--nope"}, 2, ""},
		{"a model's weights by held type", []string{"doctor", "--backend", "go", "--model", "../../model/wan/testdata/a14b", "--weights-dtype", "q8_0"}, 0,
			"weights of ../../model/wan/testdata/a14b (--weights-dtype q8_0): condition 0 B, denoiser 14.79 GiB + 14.79 GiB, decode 484.06 MiB\n  held by type:    27.81 GiB q8_0, 2.24 GiB f32\n"},
		// Without vdpp's kernels a block type is held in f32, bf16 as GoMLX's BFloat16.
		{"weights by held type of a mix", []string{"doctor", "--backend", "go", "--model", "../../model/wan/testdata/a14b", "--weights-dtype", "q4_k_m"}, 0,
			"weights of ../../model/wan/testdata/a14b (--weights-dtype q4_k_m): condition 0 B, denoiser 9.56 GiB + 9.56 GiB, decode 484.06 MiB\n  held by type:    9.82 GiB q4_K, 7.53 GiB q6_K, 2.24 GiB f32\n"},
		{"weights held without kernels: q8_0", []string{"doctor", "--backend", "go:kernels=off", "--model", "../../model/wan/testdata/a14b", "--weights-dtype", "q8_0"}, 0,
			"denoiser 53.23 GiB + 53.23 GiB, decode 484.06 MiB\n  held by type:    106.93 GiB f32\n  backend holds:   bf16 as a GoMLX dtype, every other type in f32\n" +
				"  note:            q8_0 held in f32 on this backend; --weights-dtype bf16 holds the weights in half of that\n"},
		{"weights held without kernels: bf16", []string{"doctor", "--backend", "go:kernels=off", "--model", "../../model/wan/testdata/a14b", "--weights-dtype", "bf16"}, 0,
			"held by type:    52.34 GiB bf16, 2.24 GiB f32\n  backend holds:   bf16 as a GoMLX dtype, every other type in f32\n--backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("stdout lacks %q:\n%s", tc.want, stdout.String())
			}
		})
	}
}

func TestDoctorJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"doctor", "--backend", "go:kernels=on", "--try", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		GPU        struct{ Evidence string }
		Resolution struct{ Config string }
		Tried      bool
		Backend    string
		TryError   string           `json:"try_error"`
		CPUKernels string           `json:"cpu_kernels"`
		KernelsRan map[string]int64 `json:"kernels_ran"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if rep.Resolution.Config != "go" || !rep.Tried || rep.TryError != "" || rep.GPU.Evidence == "" || !strings.HasPrefix(rep.Backend, "SimpleGo") ||
		!strings.HasPrefix(rep.CPUKernels, "go: ") || rep.KernelsRan["row norm"] != 1 {
		t.Errorf("report %+v", rep)
	}
}
