package serve

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/cli/clitest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/job"
)

// parseOptions parses args as `vdpp serve` does and turns them into a Config.
func parseOptions(t *testing.T, args ...string) (Options, Config, error) {
	t.Helper()
	o := DefaultOptions()
	fs := cli.New("serve", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, Config{}, err
	}
	cfg, err := o.Config(nil)
	return o, cfg, err
}

// TestOptionsKeepJobs: --keep-jobs defaults to job.DefaultKeepJobs, 0 keeps jobs forever,
// and a negative value is a usage error.
func TestOptionsKeepJobs(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr error
	}{
		{"default", nil, job.DefaultKeepJobs, nil},
		{"forever", []string{"--keep-jobs", "0"}, 0, nil},
		{"a day and a half", []string{"--keep-jobs=36h"}, 36 * time.Hour, nil},
		{"negative", []string{"--keep-jobs", "-1h"}, 0, cli.ErrUsage},
		{"not a duration", []string{"--keep-jobs", "7d"}, 0, cli.ErrUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, cfg, err := parseOptions(t, c.args...)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("%q: %v, want %v", c.args, err, c.wantErr)
				}
				return
			}
			if err != nil || cfg.KeepJobs != c.want {
				t.Fatalf("%q: keep %v, %v; want %v", c.args, cfg.KeepJobs, err, c.want)
			}
		})
	}
}

// serve defaults to the built-in model (not the synthetic stand-in), takes the mesh flags
// as generate and bench do (--nproc alone: a pipeline; --pp --dp: replicas of pipelines;
// --cfg 2, --cp C: a unit of ranks per stage) and refuses mesh mistakes in one line each;
// --model ORG/NAME is found in the Hugging Face cache or refused saying where it looked.
func TestOptionsModelAndMesh(t *testing.T) {
	o, cfg, err := parseOptions(t)
	if err != nil || o.Model != "builtin" || cfg.NProc != 2 || cfg.Mesh != (comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}) || o.MeshGiven() || o.AutoMesh() {
		t.Fatalf("defaults: model %q, nproc %d, mesh %v, options %+v, %v", o.Model, cfg.NProc, cfg.Mesh, o, err)
	}
	for args, want := range map[string]comm.Mesh{
		"--pp 3":           {PP: 3, CFG: 1, CP: 1, DP: 1},
		"--nproc 3":        {PP: 3, CFG: 1, CP: 1, DP: 1},
		"--dp 2":           {PP: 1, CFG: 1, CP: 1, DP: 2},
		"--nproc 4 --dp 2": {PP: 2, CFG: 1, CP: 1, DP: 2},
		"--pp 2 --dp 2":    {PP: 2, CFG: 1, CP: 1, DP: 2},
		"--cfg 2":          {PP: 1, CFG: 2, CP: 1, DP: 1},
		"--pp 2 --cfg 2":   {PP: 2, CFG: 2, CP: 1, DP: 1},
		"--cp 2 --dp 2":    {PP: 1, CFG: 1, CP: 2, DP: 2},
		"--cfg 2 --cp 2":   {PP: 1, CFG: 2, CP: 2, DP: 1},
	} {
		o, cfg, err := parseOptions(t, strings.Fields(args)...)
		if err != nil || cfg.Mesh != want || cfg.NProc != want.Size() || !o.MeshGiven() || o.AutoMesh() {
			t.Errorf("%s: mesh %v, nproc %d, %v; want %v", args, cfg.Mesh, cfg.NProc, err, want)
		}
	}
	// --plan auto: the mesh is chosen at start for --nproc devices.
	for _, c := range []struct {
		args    string
		given   bool
		goal    string
		devices int
	}{
		{"--plan auto", false, "throughput", 2},
		{"--plan auto --nproc 4 --goal latency", true, "latency", 4},
	} {
		o, cfg, err := parseOptions(t, strings.Fields(c.args)...)
		if err != nil || !o.AutoMesh() || o.MeshGiven() != c.given || o.Goal != c.goal || cfg.NProc != c.devices || cfg.Mesh != (comm.Mesh{}) {
			t.Errorf("%s: options %+v, nproc %d, mesh %v, %v; want %s on %d devices", c.args, o, cfg.NProc, cfg.Mesh, err, c.goal, c.devices)
		}
	}
	for args, want := range map[string]string{
		"--nproc 2 --pp 3":        "--nproc 2 but --pp 3",
		"--dp 0 --pp -1":          "--pp -1: every degree must be at least 1",
		"--cfg 3":                 "--cfg 3: classifier-free guidance has two halves (use 1 or 2)",
		"--plan manual":           `--plan "manual": only "auto" is known`,
		"--plan auto --dp 2":      "--plan auto chooses --pp and --dp itself; give only --nproc",
		"--plan auto --goal fast": "--goal: ",
	} {
		_, _, err := parseOptions(t, strings.Fields(args)...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	_, err = ResolveModelSpec("stabilityai/stable-video-diffusion-img2vid-xt")
	if !errors.Is(err, family.ErrNotCached) || !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "models--stabilityai--stable-video-diffusion-img2vid-xt") {
		t.Fatalf("a model not in the cache: %v", err)
	}
	if got := (Options{Model: "stabilityai/stable-video-diffusion-img2vid-xt"}).ServedNames(); got[0] != "stabilityai/stable-video-diffusion-img2vid-xt" {
		t.Fatalf("served name of a Hugging Face id: %v", got)
	}
}

// The other options reach the Config: the byte counts with their units, the served names,
// the connection limits, the token from the environment unless given.
func TestOptionsConfig(t *testing.T) {
	env := func(k string) string {
		if k == TokenEnv {
			return "from-env"
		}
		return ""
	}
	o := DefaultOptions()
	fs := cli.New("serve", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(strings.Fields("--max-memory 64GiB --min-free-space 2GB --served-model-name a,,b --max-conns 9 --max-frames 7 --model /no/such/dir/m1")); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(env)
	if err != nil || cfg.MaxMemory != 64<<30 || cfg.MinFreeBytes != 2e9 || !reflect.DeepEqual(cfg.ServedModelNames, []string{"a", "b"}) ||
		cfg.Conns.Max != 9 || cfg.Limits.MaxFrames != 7 || cfg.Limits.MaxResolution != job.DefaultLimits().MaxResolution || cfg.Token != "from-env" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	if cfg, _ := (Options{Token: "given", Model: "m"}).Config(env); cfg.Token != "given" {
		t.Fatalf("a given token was replaced by %q", cfg.Token)
	}
	if got := DefaultOptions(); got.Limits.MaxFrames != 0 || got.Limits.MaxImagePixels != 0 || (Options{Model: "/x/y/m1"}).ServedNames()[0] != "m1" {
		t.Fatalf("defaults: %+v", got)
	}
	for _, args := range []string{"--max-memory lots", "--served-model-name ,", "--min-free-space 1.5GiB"} {
		o := DefaultOptions()
		fs := cli.New("serve", nil, nil)
		o.RegisterFlags(fs)
		if err := fs.Parse(strings.Fields(args)); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%s: %v, want a usage error", args, err)
		}
	}
	if _, err := SharedSecret(func(string) string { return "abc" }); !errors.Is(err, ErrOptions) {
		t.Fatalf("a short secret: %v", err)
	}
}

// The worker's arguments, rendered from its flag set, parse back to the same options.
func TestWorkerArgsRoundTrip(t *testing.T) {
	clitest.RoundTrip(t, DefaultWorkerOptions, (*WorkerOptions).RegisterFlags, WorkerOptions.Args,
		[]string{"--connect", "127.0.0.1:9", "--rank", "2", "--model", "svd", "--model-dir", "/m", "--step-ms", "0.5"})
	spec := ModelSpec{Name: "svd", Dir: "/m x", Variant: "fp16", Backend: "go", StepMS: 2, Cost: "spin"}
	args := WorkerArgs(spec, 3, "10.0.0.1:5")
	if args[0] != "worker" || args[1] != "serve" {
		t.Fatalf("args %q", args)
	}
	o := DefaultWorkerOptions()
	fs := cli.New("worker serve", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(args[2:]); err != nil || !reflect.DeepEqual(o.Spec(), spec) || o.Rank != 3 || o.Connect != "10.0.0.1:5" {
		t.Fatalf("parsed %+v, %v", o, err)
	}
}

// TestResolveModelSpec: --model maps a folder and "builtin" to the family its
// model_index.json names, with that folder; names to themselves; a folder no family
// claims, or without a readable model_index.json, and "builtin" without a built-in model to
// a clear error.
func TestResolveModelSpec(t *testing.T) {
	dir := t.TempDir()
	builtinDir := t.TempDir()
	tuned, corrupt := t.TempDir(), t.TempDir()
	unreadable, foreign := t.TempDir(), t.TempDir()
	for d, class := range map[string]string{dir: "StableVideoDiffusionPipeline", builtinDir: "StableVideoDiffusionPipeline",
		tuned: "StableVideoDiffusionPipeline", corrupt: "StableVideoDiffusionPipeline", foreign: "SomeOtherPipeline"} {
		if err := os.WriteFile(filepath.Join(d, "model_index.json"), []byte(`{"_class_name": "`+class+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for d, text := range map[string]string{tuned: `{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 5}`, corrupt: `{"decode_chunk_size": "seven"}`} {
		if err := os.WriteFile(filepath.Join(d, checkpoint.SamplingFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		model    string
		resolver func(string) (string, error)
		wantName string
		wantDir  string
		wantErr  error
	}{
		{"folder", dir, nil, "svd", dir, nil},
		{"relative folder", filepath.Join(dir, "."), nil, "svd", dir, nil},
		{"folder with vdpp_sampling.json", tuned, nil, "svd", tuned, nil},
		{"folder with a corrupt vdpp_sampling.json", corrupt, nil, "", "", checkpoint.ErrSampling},
		{"folder without model_index.json", unreadable, nil, "", "", nil},
		{"folder of a pipeline no family runs", foreign, nil, "", "", family.ErrUnknown},
		{"synthetic", "synthetic", nil, "synthetic", "", nil},
		{"empty", "", nil, "", "", cli.ErrUsage},
		{"builtin not in this build", "builtin", nil, "", "", ErrBuiltinUnavailable},
		{"builtin resolved", "builtin", func(string) (string, error) { return builtinDir, nil }, "svd", builtinDir, nil},
		{"builtin resolver fails", "builtin", func(string) (string, error) { return "", errors.New("no weights") }, "", "", nil},
	}
	defer func(r func(string) (string, error)) { resolveBuiltin = r }(resolveBuiltin)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resolveBuiltin = c.resolver
			spec, err := ResolveModelSpec(c.model)
			if c.wantName == "" {
				if err == nil || (c.wantErr != nil && !errors.Is(err, c.wantErr)) {
					t.Fatalf("ResolveModelSpec(%q) = %+v, %v; want error %v", c.model, spec, err, c.wantErr)
				}
				return
			}
			if err != nil || spec.Name != c.wantName || spec.Dir != c.wantDir {
				t.Fatalf("ResolveModelSpec(%q) = %+v, %v; want %s %s", c.model, spec, err, c.wantName, c.wantDir)
			}
		})
	}
	resolveBuiltin = nil
	if _, err := ResolveModelSpec("builtin"); err == nil || err.Error() != "serve: builtin model not available in this build" {
		t.Fatalf("builtin error: %v", err)
	}
}

// A Wan folder without a text encoder is refused at start with one line saying why and
// naming the missing file.
func TestResolveModelSpecRefusesTextToVideo(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	_, err := ResolveModelSpec(dir)
	if err == nil || !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "text-to-video model (wan") || !strings.Contains(err.Error(), "text_encoder/config.json is missing") {
		t.Fatalf("ResolveModelSpec(wan-dev) error %v", err)
	}
}
