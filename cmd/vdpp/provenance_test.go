package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/internal/buildinfo"
	"github.com/vdpp/vdpp/video"
)

// report.json says how a sample was made (the vdpp build, the job as a command and as the
// flags --from-report reads, the scheduler and its config, the weights by file and
// SHA-256); the PNG frames and the MP4 carry the job's parameters; and `vdpp generate
// --from-report` re-runs the job: every sample's frames the same on the same mesh, and a
// flag given with it changes the job.
func TestGenerateFromReport(t *testing.T) {
	t.Parallel()
	job := []string{"--model", "builtin-wan", "--prompt", "a red fox", "--steps", "3", "--num-frames", "5", "--seed", "7", "--pp", "2", "--num-samples", "2"}
	a := runGenerateBin(t, job...)
	rep, err := generate.ReadReport(filepath.Join(a, "sample-001", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Vdpp.Version != buildinfo.Version || !strings.HasPrefix(rep.Command, "vdpp generate ") || !strings.Contains(rep.Command, "--prompt='a red fox'") ||
		!strings.Contains(rep.Command, "--model=builtin-wan") || rep.NumSamples != 2 || rep.PP != 2 {
		t.Fatalf("report: vdpp %+v, command %q, %d samples, pp %d", rep.Vdpp, rep.Command, rep.NumSamples, rep.PP)
	}
	if s := rep.Scheduler; s == nil || s.Class != "UniPCMultistepScheduler" || s.File != "scheduler/scheduler_config.json" || !bytes.Contains(s.Config, []byte(`"flow_shift"`)) {
		t.Fatalf("scheduler %+v", rep.Scheduler)
	}
	want := map[string]string{}
	for _, f := range []string{"transformer/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("../../builtin/wan", f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		want[f] = hex.EncodeToString(sum[:])
	}
	if len(rep.Weights) != len(want) {
		t.Fatalf("weights %+v, want %d files", rep.Weights, len(want))
	}
	for _, w := range rep.Weights {
		if want[w.File] != w.SHA256 || w.Bytes <= 0 {
			t.Fatalf("weights file %+v, want sha256 %s", w, want[w.File])
		}
	}
	// The files' parameters: the job without the mesh, and the build.
	f, err := os.Open(filepath.Join(a, "sample-000", "frames", "002.png"))
	if err != nil {
		t.Fatal(err)
	}
	text, err := video.PNGText(f)
	f.Close()
	if p := text["parameters"]; err != nil || !strings.Contains(p, "--seed=7") || !strings.Contains(p, "--prompt='a red fox'") || strings.Contains(p, "--pp") || !strings.Contains(p, "vdpp "+buildinfo.Version) {
		t.Fatalf("PNG parameters %q, %v", text["parameters"], err)
	}
	mp4, err := os.ReadFile(filepath.Join(a, "sample-000", "video.mp4"))
	// ffmpeg's MP4 keeps it as the comment tag, the uncompressed one in moov/udta/©cmt.
	if err != nil || !(bytes.Contains(mp4, []byte("\xa9cmt")) || bytes.Contains(mp4, []byte("comment"))) || !bytes.Contains(mp4, []byte("--seed=7")) {
		t.Fatalf("the MP4 has no comment with the parameters (%v)", err)
	}

	b := runGenerateBin(t, "--from-report", filepath.Join(a, "sample-001", "report.json"))
	brep, err := generate.ReadReport(filepath.Join(b, "sample-001", "report.json"))
	if err != nil || strings.Join(brep.Args, " ") != strings.Join(rep.Args, " ") || brep.PP != 2 || brep.NumSamples != 2 {
		t.Fatalf("the re-run's report: args %q (want %q), pp %d, %v", brep.Args, rep.Args, brep.PP, err)
	}
	for _, s := range []string{"sample-000", "sample-001"} {
		requireSameFrames(t, a, b, s, 5, "--from-report")
	}
	c := runGenerateBin(t, "--from-report", filepath.Join(a, "sample-000", "report.json"), "--seed", "8", "--num-samples", "1")
	if bytes.Equal(framePixels(t, filepath.Join(a, "sample-000", "frames", "002.png")), framePixels(t, filepath.Join(c, "sample-000", "frames", "002.png"))) {
		t.Fatal("--seed 8 after --from-report made the seed 7 video")
	}
	if crep, err := generate.ReadReport(filepath.Join(c, "sample-000", "report.json")); err != nil || crep.Seed != 8 {
		t.Fatalf("--seed 8 after --from-report: seed %d, %v", crep.Seed, err)
	}
	code, _, errOut := runHere("generate", "--from-report", filepath.Join(t.TempDir(), "missing.json"))
	if code != 2 || !strings.Contains(errOut, "--from-report") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("a missing report: exit %d, %q", code, errOut)
	}
}
