package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/netns"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// a14bLayers is how many of an A14B expert's 40 layers the two-host test keeps: each expert
// is then about 1 GB at q8_0 (the embedders, the time projection and two blocks at the
// released widths), twice the memory of the rest of a process, so holding one expert
// instead of two shows.
const a14bLayers = 2

// TestMultiNodeA14B: two hosts each hold one expert of a Wan 2.2 A14B-shaped model (the
// released widths and heads, two layers, random weights written as q8_0 GGUF files in Wan's
// original layout, kept in q8_0 as loaded): `vdpp launch` runs `vdpp generate` as a 2-stage
// pipeline, one expert per host, and the video is the one process's with both experts bit
// for bit, while each host's peak resident memory stays under 60% of that process's.
func TestMultiNodeA14B(t *testing.T) {
	if testing.Short() {
		t.Skip("writes two 1 GB experts")
	}
	net := netns.New(t, netns.Config{Hosts: 2})
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	wantest.WriteMoEFolder(t, model, wantest.A14BConfig(a14bLayers), 1)
	cfg, err := transformer.ReadConfig(filepath.Join(model, "transformer"))
	if err != nil {
		t.Fatal(err)
	}
	high, low := filepath.Join(dir, "high.gguf"), filepath.Join(dir, "low.gguf")
	size := wantest.WriteRandomGGUF(t, cfg, high, 10)
	wantest.WriteRandomGGUF(t, cfg, low, 11)
	emb := tensor.New(8, cfg.TextDim)
	for i := range emb.Data {
		emb.Data[i] = float32(i%13)/13 - 0.5
	}
	embeds := filepath.Join(dir, "embeds.safetensors")
	if err := safetensors.WriteMapFile(embeds, map[string]*tensor.Dense{"prompt_embeds": emb}, nil); err != nil {
		t.Fatal(err)
	}
	args := []string{"generate", "--model", model, "--transformer", high, "--transformer-2", low, "--prompt-embeds", embeds,
		"--negative-prompt-embeds", embeds, "--num-frames", "5", "--height", "32", "--width", "32", "--steps", "4",
		"--guidance-scale", "4", "--seed", "5", "--quiet"}

	oneDir := filepath.Join(dir, "one")
	cmd := exec.Command(vdpp(t), append(append([]string(nil), args...), "--nproc", "1", "--out", oneDir)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vdpp generate (one process): %v\n%s", err, out)
	}
	oneRSS := maxRSS(cmd.ProcessState)

	multi := filepath.Join(dir, "multi")
	margs := append(append([]string(nil), args...), "--out", multi)
	n0 := startNode(t, net.Hosts, 0, 1, margs...)
	n1 := startNode(t, net.Hosts, 1, 1, margs...)
	waitAll(t, 5*time.Minute, n0, n1)
	requireSameFrames(t, oneDir, multi, "sample-000", 5, "one expert on each of 2 hosts")

	var rep struct {
		Stages []struct {
			Rank    int              `json:"rank"`
			Weights map[string]int64 `json:"weight_bytes"`
			Types   map[string]int64 `json:"weight_bytes_by_type"`
		} `json:"stages"`
	}
	data, err := os.ReadFile(filepath.Join(multi, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 2 || rep.Stages[0].Weights["transformer_2"] != 0 || rep.Stages[1].Weights["transformer"] != 0 ||
		rep.Stages[0].Types["q8_0"] < size*9/10 || rep.Stages[1].Types["q8_0"] < size*9/10 {
		t.Fatalf("stages hold %+v, want one expert each, in q8_0 (a file is %d bytes)", rep.Stages, size)
	}
	for _, n := range []*node{n0, n1} {
		rss := maxRSS(n.cmd.ProcessState)
		t.Logf("host %d: peak RSS %d MB, the one process %d MB (%.0f%%)", n.host.Index, rss>>20, oneRSS>>20, 100*float64(rss)/float64(oneRSS))
		if rss <= 0 || oneRSS <= 0 || float64(rss) >= 0.6*float64(oneRSS) {
			t.Errorf("host %d: peak RSS %d MB, not under 60%% of the one process's %d MB", n.host.Index, rss>>20, oneRSS>>20)
		}
	}
}

// maxRSS is the peak resident memory of a finished process and of the children it waited
// for (getrusage's ru_maxrss, in bytes).
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return ru.Maxrss << 10
}
