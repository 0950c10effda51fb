package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	_ "github.com/vdpp/vdpp/model/families" // synthetic, builtin
)

// runPlan parses args as `vdpp plan` does and runs the command.
func runPlan(args []string, stdout, stderr *bytes.Buffer) error {
	c := DefaultCommand()
	fs := cli.New("plan", nil, nil)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage // vdpp refuses arguments after the flags
	}
	return c.Run(context.Background(), fs.Given, stdout, stderr)
}

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
	out := filepath.Join(t.TempDir(), "json")
	var stdout, stderr bytes.Buffer
	if err := runPlan(append(args, "--json", out), &stdout, &stderr); err != nil {
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
	cal := Calibration{Version: CalibrationVersion, Model: "synthetic", LatentShape: []int{4, 4, 16, 16},
		Costs: SyntheticCosts(2, 4, Link{LatencyMS: 0.5})}
	if err := SaveCalibration(path, cal); err != nil {
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
	if err := runPlan([]string{"--model", "synthetic", "--calibration", path}, &out, &errb); !errors.Is(err, ErrBadInput) {
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
		if err := runPlan(args, &out, &errb); !errors.Is(err, cli.ErrUsage) {
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
	c := Command{Model: "builtin", LatentFrames: 4, LatentChannels: 4, LatentHeight: 8, LatentWidth: 8, DecodeChunkSize: 2}
	parts, ms, err := c.measureDecode(context.Background())
	if err != nil || parts != 2 || ms <= 0 {
		t.Fatalf("%d parts of %v ms, %v; want 2 parts", parts, ms, err)
	}
	c.LatentChannels = 3
	if _, _, err := c.measureDecode(context.Background()); err == nil {
		t.Fatal("3 latent channels: no error")
	}
}

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

// vdpp plan with a static cache cuts the pipeline by computed work and shows the predicted
// speedup; an adaptive cache, whose computed steps the run decides, is refused in one line.
func TestPlanCache(t *testing.T) {
	base := []string{"--model", "synthetic", "--measure=false", "--step-ms", "5", "--handoff-ms", "0.1", "--steps", "12", "--num-samples", "8", "--devices", "2",
		"--num-frames", "4", "--height", "128", "--width", "128"}
	var stdout, stderr bytes.Buffer
	if err := runPlan(append(base, "--cache", "static", "--cache-steps", "0-5"), &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "cache speedup") || !strings.Contains(out, "1.78×, 1.78×") || !strings.Contains(out, "steps cut 3+9 by computed work") {
		t.Fatalf("no cut by computed work or predicted speedup:\n%s", out)
	}
	stdout.Reset()
	err := runPlan(append(base, "--cache", "fbcache"), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--cache static --cache-steps") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("fbcache: %v", err)
	}
}
