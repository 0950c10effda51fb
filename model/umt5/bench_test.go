package umt5

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
)

// BenchmarkForward times Forward on each golden case's inputs and, when
// VDPP_UMT5_BENCH_DIR names a UMT5 folder (scripts/umt5-speed.sh writes one), on one
// all-real sequence of 512 and of 64 tokens there.
// Run: go test ./model/umt5 -run '^$' -bench Forward -benchtime 20x
func BenchmarkForward(b *testing.B) {
	for _, name := range goldenCases {
		dir := filepath.Join("testdata", name)
		in := goldentest.ReadTensors(b, filepath.Join(dir, "inputs.safetensors"))
		ids, mask := asRows(in["input_ids"]), asRows(in["attention_mask"])
		benchForward(b, fmt.Sprintf("%s/B%dxL%d", name, len(ids), len(ids[0])), dir, ids, mask)
	}
	dir := os.Getenv("VDPP_UMT5_BENCH_DIR")
	if dir == "" {
		return
	}
	for _, l := range []int{512, 64} {
		ids, mask := make([][]int32, 1), make([][]int32, 1)
		for j := range l {
			ids[0] = append(ids[0], int32(2+j%50))
			mask[0] = append(mask[0], 1)
		}
		benchForward(b, fmt.Sprintf("%s/B1xL%d", filepath.Base(dir), l), dir, ids, mask)
	}
}

func benchForward(b *testing.B, name, dir string, ids, mask [][]int32) {
	b.Run(name, func(b *testing.B) {
		m, err := Load(dir, goldentest.Backend(b), LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Forward(ids, mask); err != nil { // compile outside the timing
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := m.Forward(ids, mask); err != nil {
				b.Fatal(err)
			}
		}
	})
}
