package sched

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestScheduleMatchesVectors(t *testing.T) {
	v := loadVectors(t)
	torchTS := map[int][]float32{25: v.Torch.S25.Timesteps, 7: v.Torch.S7.Timesteps}
	for _, n := range []int{25, 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ref := v.Schedules[strconv.Itoa(n)]
			e, err := New(DefaultSVDConfig(), n)
			if err != nil {
				t.Fatal(err)
			}
			assertBitEqual(t, "sigmas", e.Sigmas, ref.SigmasF32)
			// numpy reference: correctly rounded 0.25·ln σ → exact.
			assertBitEqual(t, "timesteps", e.Timesteps, ref.TimestepsF32)
			// executed torch: ≤ 1 ulp (torch's float32 log is not correctly rounded).
			if len(torchTS[n]) != n {
				t.Fatalf("torch timesteps: %d values", len(torchTS[n]))
			}
			for i, want := range torchTS[n] {
				if d := ulpDiff(e.Timesteps[i], want); d > 1 {
					t.Errorf("timestep %d = %v, torch %v (%d ulp)", i, e.Timesteps[i], want, d)
				}
			}
			if e.InitNoiseSigma != ref.InitNoiseSigmaF32 || e.InitNoiseSigma != 700.000732421875 {
				t.Errorf("init_noise_sigma = %v, want %v", e.InitNoiseSigma, ref.InitNoiseSigmaF32)
			}
			s64 := karrasSigmas(0.002, 700, n)
			for i, s := range s64 {
				if d := math.Abs(s - ref.SigmasF64[i]); d > 4*ulp64(ref.SigmasF64[i]) {
					t.Errorf("float64 sigma %d = %v, want %v", i, s, ref.SigmasF64[i])
				}
			}
			if e.NumSteps() != n || len(e.Sigmas) != n+1 || e.Sigmas[n] != 0 {
				t.Errorf("NumSteps %d, len(Sigmas) %d, last %v", e.NumSteps(), len(e.Sigmas), e.Sigmas[n])
			}
		})
	}
}

func ulp64(x float64) float64 { return math.Nextafter(math.Abs(x), math.Inf(1)) - math.Abs(x) }

// runSteps replays the three reference steps: scale_model_input, pred x̂0 and the Euler
// update must be bit-identical to the float32 reference (itself bit-identical to torch).
func runSteps(t *testing.T, e *Euler, steps []refStep, combine func(k int, dst []float32)) {
	t.Helper()
	if len(steps) == 0 {
		t.Fatal("no reference steps")
	}
	x := append([]float32(nil), steps[0].SampleIn...)
	buf := make([]float32, len(x))
	mo := make([]float32, len(x))
	for k, st := range steps {
		assertBitEqual(t, "sample_in step "+strconv.Itoa(k), x, st.SampleIn)
		if st.StepIndex != k || st.Sigma != e.Sigmas[k] || st.SigmaNext != e.Sigmas[k+1] {
			t.Fatalf("step %d: reference sigma %v→%v, schedule %v→%v", k, st.Sigma, st.SigmaNext, e.Sigmas[k], e.Sigmas[k+1])
		}
		if err := e.ScaleModelInput(buf, x, k); err != nil {
			t.Fatal(err)
		}
		assertBitEqual(t, "scaled input step "+strconv.Itoa(k), buf, st.Scaled)
		combine(k, mo)
		assertBitEqual(t, "model output step "+strconv.Itoa(k), mo, st.ModelOut)
		if err := e.PredOriginal(buf, mo, x, k); err != nil {
			t.Fatal(err)
		}
		assertBitEqual(t, "pred x0 step "+strconv.Itoa(k), buf, st.PredX0)
		if err := e.Step(x, mo, x, k); err != nil { // in place, as the engine does
			t.Fatal(err)
		}
		assertBitEqual(t, "prev sample step "+strconv.Itoa(k), x, st.Prev)
		for i, want := range st.PrevF64 {
			if d := math.Abs(float64(x[i]) - want); d > 5e-5 {
				t.Errorf("step %d: prev[%d] = %v, float64 reference %v", k, i, x[i], want)
				break
			}
		}
	}
}

func TestStepMatchesVectors(t *testing.T) {
	v := loadVectors(t)
	numel := 1
	for _, d := range v.LatentShape {
		numel *= d
	}
	for _, n := range []int{25, 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ref := v.Schedules[strconv.Itoa(n)]
			e, err := New(DefaultSVDConfig(), n)
			if err != nil {
				t.Fatal(err)
			}
			// Initial latents are float32(noise)·init_noise_sigma.
			x0 := make([]float32, numel)
			for i := range x0 {
				x0[i] = float32((5*i)%17-8) / 8 * e.InitNoiseSigma
			}
			assertBitEqual(t, "initial latents", x0, ref.Steps[0].SampleIn)
			runSteps(t, e, ref.Steps, func(k int, dst []float32) {
				for i := range dst {
					dst[i] = float32((i+3*k)%13-6) / 6
				}
			})
		})
	}
}

func TestCFGStepsMatchVectors(t *testing.T) {
	v := loadVectors(t)
	ref := v.Schedules["25"].CFG
	if ref == nil {
		t.Fatal("vectors.json has no CFG block")
	}
	e, err := New(DefaultSVDConfig(), 25)
	if err != nil {
		t.Fatal(err)
	}
	T := v.LatentShape[1]
	g := GuidanceWeights(1, 3, T)
	assertBitEqual(t, "guidance", g, ref.Guidance)
	numel := len(ref.Steps[0].SampleIn)
	u, c := make([]float32, numel), make([]float32, numel)
	runSteps(t, e, ref.Steps, func(k int, dst []float32) {
		for i := range u {
			u[i] = float32((2*i+k)%9-4) / 4
			c[i] = float32((3*i+2*k)%11-5) / 5
		}
		if err := CFGCombine(dst, u, c, g, numel/T); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGoldenFullPipeline checks the schedule, guidance weights, CFG combination and
// every Euler step against tensors recorded from the executed diffusers pipeline.
func TestGoldenFullPipeline(t *testing.T) {
	dir := filepath.Dir(sharedFile(t, "golden/dev/cases/full_pipeline/case.json"))
	in := readF32Safetensors(t, filepath.Join(dir, "inputs.safetensors"))
	out := readF32Safetensors(t, filepath.Join(dir, "outputs.safetensors"))
	cfg, err := LoadConfig(filepath.Join(dir, "..", "..", "scheduler", "scheduler_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	steps := len(out["timesteps"])
	e, err := New(cfg, steps)
	if err != nil {
		t.Fatal(err)
	}
	assertBitEqual(t, "sigmas", e.Sigmas, out["sigmas"])
	for i, want := range out["timesteps"] {
		if d := ulpDiff(e.Timesteps[i], want); d > 1 {
			t.Errorf("timestep %d = %v, torch %v", i, e.Timesteps[i], want)
		}
	}
	T := len(out["guidance_scale"])
	g := GuidanceWeights(1, 3, T)
	assertBitEqual(t, "guidance_scale", g, out["guidance_scale"])
	x := append([]float32(nil), in["init_noise"]...)
	for i := range x {
		x[i] *= e.InitNoiseSigma
	}
	assertBitEqual(t, "latents_init", x, out["latents_init"])
	n := len(x)
	v := make([]float32, n)
	for k := 0; k < steps; k++ {
		ks := strconv.Itoa(k)
		uo := out["unet_out_step"+ks]
		if err := CFGCombine(v, uo[:n], uo[n:], g, n/T); err != nil {
			t.Fatal(err)
		}
		assertBitEqual(t, "v_guided_step"+ks, v, out["v_guided_step"+ks])
		if err := e.Step(x, out["v_guided_step"+ks], x, k); err != nil {
			t.Fatal(err)
		}
		assertBitEqual(t, "latents_step"+ks, x, out["latents_step"+ks])
		x = append(x[:0], out["latents_step"+ks]...) // keep later steps independent
	}
}

// TestDiffusersKarrasFullLoop re-runs diffusers' test_full_loop_device_karras_sigmas
// (epsilon, linear betas, linspace spacing, discrete timesteps, Karras endpoints taken
// from the training table); its constants come from diffusers' own test file.
func TestDiffusersKarrasFullLoop(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"num_train_timesteps": 1100, "beta_start": 0.0001,
		"beta_end": 0.02, "beta_schedule": "linear", "use_karras_sigmas": true}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	const num = 4 * 3 * 8 * 8
	x := make([]float32, num)
	for i := range x {
		x[i] = float32(float64(i)/num) * e.InitNoiseSigma
	}
	mo := make([]float32, num)
	for k, ts := range e.Timesteps {
		if err := e.ScaleModelInput(x, x, k); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			mo[i] = x[i] * ts / (ts + 1)
		}
		if err := e.Step(x, mo, x, k); err != nil {
			t.Fatal(err)
		}
	}
	var sum float64
	for _, v := range x {
		sum += math.Abs(float64(v))
	}
	if math.Abs(sum-124.52299499511719) > 1e-2 || math.Abs(sum/num-0.16213932633399963) > 1e-3 {
		t.Errorf("sum %v mean %v, diffusers expects 124.52299499511719 / 0.16213932633399963", sum, sum/num)
	}
	if e.Timesteps[0] < 1000 || e.Timesteps[9] > 1 {
		t.Errorf("discrete timesteps out of range: %v", e.Timesteps)
	}
}

func TestPredictionTypes(t *testing.T) {
	x := []float32{1, -2, 3.5}
	mo := []float32{0.5, 0.25, -1}
	for _, tc := range []struct {
		pred string
		x0   func(s float32, i int) float32
	}{
		{PredEpsilon, func(s float32, i int) float32 { return x[i] - float32(s*mo[i]) }},
		{PredSample, func(s float32, i int) float32 { return mo[i] }},
		{PredVPrediction, func(s float32, i int) float32 {
			s2 := float32(s*s) + 1
			return float32(mo[i]*(-s/float32(math.Sqrt(float64(s2))))) + x[i]/s2
		}},
	} {
		t.Run(tc.pred, func(t *testing.T) {
			cfg := DefaultSVDConfig()
			cfg.PredictionType = tc.pred
			e, err := New(cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			x0, next := make([]float32, 3), make([]float32, 3)
			for k := 0; k < 3; k++ {
				s, sn := e.Sigmas[k], e.Sigmas[k+1]
				_ = e.PredOriginal(x0, mo, x, k)
				_ = e.Step(next, mo, x, k)
				for i := range x {
					want0 := tc.x0(s, i)
					want := x[i] + float32((x[i]-want0)/s*(sn-s))
					if x0[i] != want0 || next[i] != want {
						t.Errorf("step %d elem %d: x0 %v next %v, want %v %v", k, i, x0[i], next[i], want0, want)
					}
				}
			}
			// Last step lands on x̂0 (σ' = 0) up to rounding.
			_ = e.PredOriginal(x0, mo, x, 2)
			_ = e.Step(next, mo, x, 2)
			for i := range x {
				if math.Abs(float64(next[i]-x0[i])) > 1e-5*math.Max(1, math.Abs(float64(x0[i]))) {
					t.Errorf("last step %v != x0 %v", next[i], x0[i])
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	svdJSON := `{"_class_name": "EulerDiscreteScheduler", "beta_end": 0.012, "beta_schedule": "scaled_linear",
	"beta_start": 0.00085, "clip_sample": false, "interpolation_type": "linear", "num_train_timesteps": 1000,
	"prediction_type": "v_prediction", "set_alpha_to_one": false, "sigma_max": 700.0, "sigma_min": 0.002,
	"skip_prk_steps": true, "steps_offset": 1, "timestep_spacing": "leading", "timestep_type": "continuous",
	"trained_betas": null, "use_karras_sigmas": true}`
	got, err := ParseConfig([]byte(svdJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, DefaultSVDConfig()) {
		t.Errorf("parsed SVD config\n%+v\nwant\n%+v", got, DefaultSVDConfig())
	}
	for _, tc := range []struct {
		name, json  string
		unsupported bool
	}{
		{"not karras", `{"use_karras_sigmas": false}`, true},
		{"cosine betas", `{"use_karras_sigmas": true, "beta_schedule": "squaredcos_cap_v2"}`, true},
		{"bad prediction", `{"use_karras_sigmas": true, "prediction_type": "flow"}`, true},
		{"exponential", `{"use_karras_sigmas": true, "use_exponential_sigmas": true}`, true},
		{"zero snr", `{"use_karras_sigmas": true, "rescale_betas_zero_snr": true}`, true},
		{"trained betas", `{"use_karras_sigmas": true, "trained_betas": [0.1, 0.2]}`, true},
		{"spacing", `{"use_karras_sigmas": true, "timestep_spacing": "weird"}`, true},
		{"final sigma", `{"use_karras_sigmas": true, "final_sigmas_type": "other"}`, true},
		{"log linear needs endpoints", `{"use_karras_sigmas": true, "interpolation_type": "log_linear"}`, true},
		{"sigma order", `{"use_karras_sigmas": true, "sigma_min": 5, "sigma_max": 1}`, false},
		{"malformed", `{"use_karras_sigmas": tru`, false},
		{"train steps", `{"use_karras_sigmas": true, "num_train_timesteps": 1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v for %v", !tc.unsupported, err)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("LoadConfig of a missing file: no error")
	}
	if _, err := New(DefaultSVDConfig(), 0); err == nil {
		t.Error("New with 0 steps: no error")
	}
}

func TestFinalSigmaMinAndSpacings(t *testing.T) {
	for _, sp := range []string{"linspace", "leading", "trailing"} {
		cfg := DefaultSVDConfig()
		cfg.TimestepSpacing = sp
		cfg.SigmaMin, cfg.SigmaMax = nil, nil
		cfg.FinalSigmasType = "sigma_min"
		e, err := New(cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		tab := newTrainingTable(cfg)
		if e.Sigmas[5] != tab.sigmas[0] {
			t.Errorf("%s: final sigma %v, want training sigma %v", sp, e.Sigmas[5], tab.sigmas[0])
		}
		for i := 1; i < len(e.Sigmas); i++ {
			// With linspace spacing the last Karras sigma is training sigma 0 too.
			if !(e.Sigmas[i] < e.Sigmas[i-1]) && !(i == 5 && e.Sigmas[i] == e.Sigmas[i-1]) {
				t.Errorf("%s: sigmas not decreasing: %v", sp, e.Sigmas)
			}
		}
		// sigma_max comes from the first spaced timestep of the training table.
		if e.Sigmas[0] > tab.sigmas[len(tab.sigmas)-1] || e.Sigmas[0] < tab.sigmas[len(tab.sigmas)/2] {
			t.Errorf("%s: sigma_max %v outside the training range", sp, e.Sigmas[0])
		}
		wantInit := e.Sigmas[0]
		if sp == "leading" {
			wantInit = float32(math.Sqrt(float64(float32(wantInit*wantInit) + 1)))
		}
		if e.InitNoiseSigma != wantInit {
			t.Errorf("%s: init_noise_sigma %v, want %v", sp, e.InitNoiseSigma, wantInit)
		}
	}
}

func TestStepErrors(t *testing.T) {
	e, err := New(DefaultSVDConfig(), 4)
	if err != nil {
		t.Fatal(err)
	}
	a, b := make([]float32, 4), make([]float32, 5)
	for name, err := range map[string]error{
		"step -1":      e.Step(a, a, a, -1),
		"step 4":       e.Step(a, a, a, 4),
		"len":          e.Step(a, b, a, 0),
		"scale len":    e.ScaleModelInput(b, a, 0),
		"pred step":    e.PredOriginal(a, a, a, 9),
		"cfg len":      CFGCombine(a, a, b, []float32{1}, 4),
		"cfg stride":   CFGCombine(a, a, a, []float32{1, 2, 3}, 1),
		"cfg weights":  CFGCombine(a, a, a, nil, 4),
		"cfg stride 0": CFGCombine(a, a, a, []float32{1}, 0),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
