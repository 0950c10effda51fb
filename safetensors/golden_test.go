package safetensors

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDir finds shared/golden/dev: $VDPP_GOLDEN_DIR, the repository's shared/ folder, or
// /work/shared. The test is skipped when none exists.
func goldenDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{os.Getenv("VDPP_GOLDEN_DIR"), "../shared/golden/dev", "/work/shared/golden/dev"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "model_index.json")); err == nil {
			return d
		}
	}
	t.Skip("golden data not found (set VDPP_GOLDEN_DIR)")
	return ""
}

func TestGoldenFilesOpen(t *testing.T) {
	dir := goldenDir(t)
	var paths []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".safetensors") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 14 { // 4 weight files + 5 cases x 2
		t.Fatalf("found only %d safetensors files under %s", len(paths), dir)
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if f.Len() == 0 {
			t.Errorf("%s: no tensors", p)
		}
		for _, n := range f.Names() {
			info, _ := f.Info(n)
			if !info.DType.IsFloat() {
				continue
			}
			v, err := f.Float32(n)
			if err != nil || int64(len(v)) != info.NumElements() {
				t.Errorf("%s: %s: %d values, %v", p, n, len(v), err)
			}
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestGoldenFP16MatchesFP32: the fp16 UNet holds the fp32 weights rounded to half.
func TestGoldenFP16MatchesFP32(t *testing.T) {
	dir := goldenDir(t)
	f32, err := Open(filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	f16, err := Open(filepath.Join(dir, "unet", "diffusion_pytorch_model.fp16.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f16.Close()
	n32, n16 := f32.Names(), f16.Names()
	if len(n32) != len(n16) {
		t.Fatalf("fp32 has %d tensors, fp16 %d", len(n32), len(n16))
	}
	checked, nonzero := 0, 0
	for i, name := range n32 {
		if n16[i] != name {
			t.Fatalf("tensor %d: %q vs %q", i, name, n16[i])
		}
		i32, _ := f32.Info(name)
		i16, _ := f16.Info(name)
		if i32.DType != F32 || i16.DType != F16 {
			t.Fatalf("%s: dtypes %s / %s", name, i32.DType, i16.DType)
		}
		a, err := f32.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f16.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		raw16, _ := f16.Bytes(name)
		for j := range a {
			want := HalfToFloat32(Float32ToHalf(a[j]))
			if math.Float32bits(b[j]) != math.Float32bits(want) {
				t.Fatalf("%s[%d]: fp16 file %g, fp32 %g rounds to %g", name, j, b[j], a[j], want)
			}
			if uint16(raw16[2*j])|uint16(raw16[2*j+1])<<8 != Float32ToHalf(a[j]) {
				t.Fatalf("%s[%d]: raw half bits differ", name, j)
			}
			if a[j] != b[j] {
				nonzero++
			}
		}
		checked += len(a)
	}
	if nonzero == 0 {
		t.Errorf("fp16 values equal fp32 exactly everywhere (%d values): rounding not exercised", checked)
	}
	t.Logf("%d values checked, %d changed by rounding", checked, nonzero)
}
