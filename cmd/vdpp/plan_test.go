package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/plan"
)

type planDoc struct {
	Goal    string `json:"goal"`
	Configs []struct {
		PP, CFG, CP, DP int
		First           float64 `json:"predicted_first_sample_ms"`
		Tput            float64 `json:"predicted_throughput_samples_per_s"`
		Weight          *int64  `json:"weight_bytes_per_device"`
	} `json:"configs"`
	Infeasible []json.RawMessage `json:"infeasible"`
	Notes      []string          `json:"notes"`
}

func runPlanJSON(t *testing.T, args ...string) (planDoc, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr bytes.Buffer
	if err := runPlan(context.Background(), append(args, "--json", out), &stdout, &stderr); err != nil {
		t.Fatalf("runPlan %v: %v\n%s", args, err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc planDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, stdout.String()
}

func TestRunPlan(t *testing.T) {
	base := []string{"--model", "synthetic", "--measure=false", "--step-ms", "1", "--handoff-ms", "0.1", "--steps", "28", "--num-samples", "60",
		"--num-frames", "4", "--height", "128", "--width", "128"}
	tests := []struct {
		name      string
		args      []string
		first     [4]int // best mesh pp, cfg, cp, dp
		n, nInfea int
		note      string
	}{
		{"throughput on 7", []string{"--devices", "7", "--goal", "throughput"}, [4]int{1, 1, 1, 7}, 2, 0, "data parallelism equals the step pipeline"},
		// cp4 and cfg2 x cp2 tie (one all-gather over 4 per step, the same compute); the lower cfg wins.
		{"latency guided on 4", []string{"--devices", "4", "--goal", "latency", "--max-guidance", "3"}, [4]int{1, 1, 4, 1}, 9, 0, "lowest first-sample latency: pp=1 cfg=1 cp=4 dp=1"},
		{"memory tight on 2", []string{"--devices", "2", "--num-frames", "1", "--denoiser-bytes", "1000", "--image-encoder-bytes", "300", "--vae-decoder-bytes", "300", "--memory-per-device", "1400"},
			[4]int{2, 1, 1, 1}, 1, 1, "the pipeline wins here"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, table := runPlanJSON(t, append(append([]string{}, base...), tc.args...)...)
			if len(doc.Configs) != tc.n || len(doc.Infeasible) != tc.nInfea {
				t.Fatalf("%d configs, %d infeasible; want %d, %d", len(doc.Configs), len(doc.Infeasible), tc.n, tc.nInfea)
			}
			c := doc.Configs[0]
			if [4]int{c.PP, c.CFG, c.CP, c.DP} != tc.first || c.Weight == nil || c.First <= 0 || c.Tput <= 0 {
				t.Errorf("best %+v, want mesh %v", c, tc.first)
			}
			if !strings.Contains(strings.Join(doc.Notes, "\n"), tc.note) || !strings.Contains(table, tc.note) {
				t.Errorf("no note %q in %q", tc.note, doc.Notes)
			}
		})
	}
}

func TestRunPlanCalibrationFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cal.json")
	cal := plan.Calibration{Version: plan.CalibrationVersion, Model: "synthetic", LatentShape: []int{4, 4, 16, 16},
		Costs: plan.SyntheticCosts(2, 4, plan.Link{LatencyMS: 0.5})}
	if err := plan.SaveCalibration(path, cal); err != nil {
		t.Fatal(err)
	}
	doc, _ := runPlanJSON(t, "--model", "synthetic", "--num-frames", "4", "--height", "128", "--width", "128", "--calibration", path, "--devices", "2", "--steps", "10", "--num-samples", "8", "--goal", "latency")
	// 10 steps at 2 ms: cp=2 halves the frames and adds a 0.5 ms all-to-all per step (15 ms);
	// dp=2 takes 20 ms; pp=2 adds one 0.5 ms hand-off.
	if len(doc.Configs) != 3 || doc.Configs[0].CP != 2 || doc.Configs[0].First != 15 ||
		doc.Configs[1].DP != 2 || doc.Configs[1].First != 20 || doc.Configs[2].PP != 2 || doc.Configs[2].First != 20.5 {
		t.Errorf("configs %+v", doc.Configs)
	}
	if err := os.WriteFile(path, []byte(`{"version":9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runPlan(context.Background(), []string{"--model", "synthetic", "--calibration", path}, &out, &errb); !errors.Is(err, plan.ErrBadInput) {
		t.Errorf("bad calibration: %v", err)
	}
}

func TestRunPlanUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--model", "synthetic", "--goal", "fast"},
		{"--model", "synthetic", "--steps", "-1"},
		{"--measure=false", "--model", "dummy"},
		{"--model", "synthetic", "stray"},
		{"--devices", "2"},                                // no --model
		{"--model", "synthetic", "--guidance-scale", "3"}, // a flag of text-to-video models
	} {
		var out, errb bytes.Buffer
		if err := runPlan(context.Background(), args, &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("%v: err %v, want usage error", args, err)
		}
	}
}

// A pipeline whose last stage is decode bound is told to spread the decode, and the spread
// plan is costed with it.
func TestRunPlanDecode(t *testing.T) {
	base := []string{"--model", "synthetic", "--measure=false", "--step-ms", "1", "--handoff-ms", "0", "--steps", "8",
		"--num-samples", "20", "--devices", "2", "--decode-parts", "2", "--decode-part-ms", "10"}
	_, table := runPlanJSON(t, base...)
	if want := "--decode-ranks 2 spreads its 2 parts over the stages, 71.4 samples/s instead of 47.6 (1.50x)"; !strings.Contains(table, want) {
		t.Errorf("no %q in\n%s", want, table)
	}
	doc, table := runPlanJSON(t, append(base, "--decode-ranks", "2")...)
	if want := "decode spread over 2 stages: 71.4 samples/s instead of 47.6"; !strings.Contains(table, want) {
		t.Errorf("no %q in\n%s", want, table)
	}
	for _, c := range doc.Configs {
		if c.PP == 2 && !near(c.Tput, 1000.0/14) {
			t.Errorf("pp 2 spread: %v samples/s, want %v", c.Tput, 1000.0/14)
		}
	}
}

// --measure-decode times the built-in model's decode chunk by chunk.
func TestMeasureDecode(t *testing.T) {
	parts, ms, err := measureDecode(context.Background(), &planFlags{modelName: "builtin", frames: 4, channels: 4, height: 8, width: 8, chunk: 2})
	if err != nil || parts != 2 || ms <= 0 {
		t.Fatalf("%d parts of %v ms, %v; want 2 parts", parts, ms, err)
	}
	if _, _, err := measureDecode(context.Background(), &planFlags{modelName: "builtin", frames: 4, channels: 3, height: 8, width: 8, chunk: 2}); err == nil {
		t.Fatal("3 latent channels: no error")
	}
}

func near(a, b float64) bool { return a-b < 1e-9*b && b-a < 1e-9*b }

// The plan ends with the commands that run its best mesh as printed: generate for a model
// with a conditioner and decoder, bench for every model, every size given, and serve with
// the best mesh.
func TestPlanPrintsTheCommand(t *testing.T) {
	_, table := runPlanJSON(t, "--model", "synthetic", "--measure=false", "--step-ms", "1", "--handoff-ms", "0.1", "--steps", "8",
		"--num-samples", "6", "--devices", "2", "--max-guidance", "3")
	want := "run the best mesh (pp=1 cfg=1 cp=1 dp=2):\n  vdpp bench --model synthetic --pp 1 --cfg 1 --cp 1 --dp 2 --steps 8 --num-frames 14 --height 64 --width 64 --min-guidance 1 --max-guidance 3 --num-samples 6 --step-ms 1\n" +
		"  vdpp serve --model synthetic --pp 1 --dp 2 --step-ms 1\n"
	if !strings.HasSuffix(table, want) {
		t.Fatalf("plan output ends\n%s\nwant\n%s", table[max(0, len(table)-400):], want)
	}
	if strings.Contains(table, "vdpp generate") {
		t.Fatal("a generate command for the simulator, which has no conditioner")
	}
	// A best mesh with cp: serve's line runs it too.
	_, table = runPlanJSON(t, "--model", "synthetic", "--measure=false", "--step-ms", "1", "--handoff-ms", "0.1", "--steps", "8",
		"--num-samples", "6", "--devices", "2", "--max-guidance", "3", "--goal", "latency")
	want = "run the best mesh (pp=1 cfg=1 cp=2 dp=1):\n  vdpp bench --model synthetic --pp 1 --cfg 1 --cp 2 --dp 1 --steps 8 --num-frames 14 --height 64 --width 64 --min-guidance 1 --max-guidance 3 --num-samples 6 --step-ms 1\n" +
		"  vdpp serve --model synthetic --pp 1 --cp 2 --dp 1 --step-ms 1\n"
	if !strings.HasSuffix(table, want) {
		t.Fatalf("plan output (latency) ends\n%s\nwant\n%s", table[max(0, len(table)-400):], want)
	}
}

// `vdpp plan` and `vdpp generate --plan auto` plan one workload for the same flags: the
// model's defaults (the built-in model's guidance 2 -> 4: a guided run) and one sample
// unless asked; the generate command plan prints runs the planned job (report.json has its
// sizes, steps, guidance and mesh).
func TestPlanAndPlanAutoShareTheWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	job := []string{"--model", "builtin", "--steps", "3", "--num-frames", "4"}
	var stdout, stderr bytes.Buffer
	if err := runPlan(context.Background(), append(append([]string{}, job...), "--devices", "2", "--measure=false", "--step-ms", "5"), &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	table := stdout.String()
	m := regexp.MustCompile(`\*\*Workload:\*\* (.*), memory per device`).FindStringSubmatch(table)
	if m == nil || !strings.Contains(m[1], "1 samples x 3 steps") || !strings.Contains(m[1], "guided true") {
		t.Fatalf("plan's workload: %q\n%s", m, table)
	}
	img := testImage(t)
	cmd := exec.Command(vdppBin, append(append([]string{"generate"}, job...), "--image", img, "--plan", "auto", "--nproc", "2", "--out", filepath.Join(t.TempDir(), "auto"))...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "generate: --plan auto: workload "+m[1]+"\n") {
		t.Fatalf("generate --plan auto: %v; want the workload %q:\n%s", err, m[1], out)
	}
	// The printed generate command runs the planned job.
	gen := regexp.MustCompile(`(?m)^  vdpp generate (.*)$`).FindStringSubmatch(table)
	mesh := regexp.MustCompile(`run the best mesh \(pp=(\d) cfg=(\d) cp=(\d) dp=(\d)\)`).FindStringSubmatch(table)
	if gen == nil || mesh == nil || !strings.Contains(gen[1], "--min-guidance 2 --max-guidance 4") {
		t.Fatalf("no generate command with the model's guidance:\n%s", table)
	}
	dir := runGenerateBin(t, strings.Fields(strings.Replace(gen[1], "IMAGE.png", img, 1))...)
	var rep generate.SampleReport
	b, err := os.ReadFile(filepath.Join(dir, "sample-000", "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rep.PP, rep.CFG, rep.CP, rep.DP); got != strings.Join(mesh[1:], " ") || rep.Steps != 3 || rep.Frames != 4 ||
		rep.MinGuidance != 2 || rep.MaxGuidance != 4 || rep.Height != 64 || rep.Width != 64 {
		t.Fatalf("the printed command ran mesh %s, %d steps, %d frames %dx%d, guidance %v -> %v; planned %v, 3 steps, 4 frames 64x64, 2 -> 4",
			got, rep.Steps, rep.Frames, rep.Width, rep.Height, rep.MinGuidance, rep.MaxGuidance, mesh[1:])
	}
}

// Planning a model whose own job is huge (a Wan folder's 832x480, 81 frames) without
// sizes is refused before anything is measured, naming the sizes it would have planned.
func TestPlanRefusesHugeDefaults(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	src, err := builtin.Resolve(builtin.WanName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "wan")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "vdpp_sampling.json")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runHere("plan", "--model", dir, "--devices", "2")
	if code != 2 || !strings.Contains(errOut, "81 frames at 832x480, 50 steps") || !strings.Contains(errOut, "give the sizes") {
		t.Fatalf("exit %d, %q; want a refusal naming the sizes", code, errOut)
	}
}
