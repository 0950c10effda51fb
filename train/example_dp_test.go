package train

import (
	"bytes"
	stdcontext "context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/nn"
)

// ExampleRunRank trains a tiny VAE for 3 steps of 4 clips on two ranks (goroutines over an
// in-process transport; `vdpp train --nproc 2` runs them as processes over TCP) and in one
// process: the losses are the same, bit for bit.
func ExampleRunRank() {
	cfg := microConfigs()
	options := func(dir string) Options {
		o := DefaultOptions()
		o.Dir, o.Configs, o.Steps, o.Batch, o.CheckpointEvery = dir, &cfg, 3, 4, 0
		o.VAEFrames, o.VAECrop, o.Train = 2, 8, 8
		return o
	}
	one, _ := os.MkdirTemp("", "one")
	two, _ := os.MkdirTemp("", "two")
	defer os.RemoveAll(one)
	defer os.RemoveAll(two)

	b, _ := nn.NewBackend("go")
	if _, err := Run(stdcontext.Background(), b, options(one)); err != nil {
		panic(err)
	}
	trs := comm.NewLocal(2, comm.Options{})
	results := make([]Result, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer trs[r].Close()
			g, err := comm.NewNamedGroup(trs[r], "train", []int{0, 1})
			if err != nil {
				panic(err)
			}
			b, _ := nn.NewBackend("go")
			if results[r], err = RunRank(stdcontext.Background(), b, options(two), GroupPeers(trs[r], g)); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	a, _ := os.ReadFile(LossLogPath(one))
	c, _ := os.ReadFile(LossLogPath(two))
	losses := func(log []byte) []float64 {
		var out []float64
		for _, ln := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
			var l LogLine
			if err := json.Unmarshal(ln, &l); err != nil {
				panic(err)
			}
			out = append(out, l.Loss)
		}
		return out
	}
	fmt.Println(results[0].Ranks, "ranks, steps", results[0].FromStep, "->", results[0].Step, "- same losses as one process:", slices.Equal(losses(a), losses(c)))
	// Output: 2 ranks, steps 0 -> 3 - same losses as one process: true
}
