package quant

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "remake testdata/ggml with ggml's own code: runs scripts/ggmlquant/golden.sh with $GGML_DIR (a ggml source tree)")

const (
	goldenRows   = 6
	goldenPerRow = 256
	randomBytes  = 2048
)

// goldenInputs returns the committed inputs, testdata/inputs.f32: rows of 256 weights that
// reach every branch of the quantizers (see the comments).
func goldenInputs() []float32 {
	r := rand.New(rand.NewPCG(43, 1))
	x := make([]float32, goldenRows*goldenPerRow)
	row := func(i int) []float32 { return x[i*goldenPerRow : (i+1)*goldenPerRow] }
	for i := range row(0) { // a unit normal
		row(0)[i] = float32(r.NormFloat64())
	}
	for i := range row(1) { // weight-sized values with an outlier
		row(1)[i] = float32(0.02 * r.NormFloat64())
	}
	row(1)[77] = 0.5
	for i := range row(2) { // all positive: the min clamps to 0 in the k-quants
		row(2)[i] = float32(0.5 + 1.5*r.Float64())
	}
	for i := range row(3) { // all negative
		row(3)[i] = float32(-3 + 2.9*r.Float64())
	}
	r4 := row(4) // a zero block, a constant block, a sparse block, then tiny values
	for i := 32; i < 64; i++ {
		r4[i] = 0.3
	}
	for i := 64; i < 128; i += 9 {
		r4[i] = float32(r.NormFloat64())
	}
	for i := 128; i < 256; i++ {
		r4[i] = float32(1e-3 * (2*r.Float64() - 1))
	}
	r5 := row(5) // the float types' edges: subnormals, ties, overflow, signed zero
	special := []float32{
		float32(math.Copysign(0, -1)), 1e-40, -1e-40, 5.9604645e-08, 2.9802322e-08, 8.940697e-08,
		6.1035156e-05, 6.097555e-05, 65504, 65519.996, 65520, -65520, 1e4, -1e4,
		1 + 1.0/2048, 1 + 3.0/2048, 1 + 1.0/256, 1 + 3.0/256, 0.1, -0.1, 1e30, -1e30,
	}
	copy(r5, special)
	for i := len(special); i < goldenPerRow; i++ {
		r5[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
	}
	// ±1e30 overflow the k-quants' sums of squares to infinity and their fits to NaN: float
	// arithmetic and ggml's nearest_int (bit manipulation) define every result, and no NaN
	// reaches a C float-to-int conversion (undefined behaviour), so ggml's bits are a
	// reference there too.
	return x
}

// goldenRandom returns the committed random bytes, testdata/random.bin: arbitrary blocks
// (NaN and infinite scales included) for the dequantizers.
func goldenRandom() []byte {
	r := rand.New(rand.NewPCG(43, 2))
	b := make([]byte, randomBytes)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("%v (make it with -update)", err)
	}
	return b
}

// TestGoldenInputs checks that the committed inputs are the ones the generators give, so
// that they can be reviewed as code.
func TestGoldenInputs(t *testing.T) {
	if got := readGolden(t, "inputs.f32"); !bytes.Equal(got, f32bytes(goldenInputs())) {
		t.Errorf("testdata/inputs.f32 is not goldenInputs()")
	}
	if got := readGolden(t, "random.bin"); !bytes.Equal(got, goldenRandom()) {
		t.Errorf("testdata/random.bin is not goldenRandom()")
	}
}

// TestGolden compares Quantize and Dequantize with ggml's own code, bit for bit: the
// quantized inputs byte for byte, the dequantized ones (of the quantized inputs and of
// random blocks) by their SHA-256.
func TestGolden(t *testing.T) {
	if *update {
		dir := os.Getenv("GGML_DIR")
		if dir == "" {
			t.Fatal("-update needs GGML_DIR, a ggml source tree")
		}
		cmd := exec.Command("sh", "../../scripts/ggmlquant/golden.sh", dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("golden.sh: %v", err)
		}
	}
	in := goldenInputs()
	rnd := goldenRandom()
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(readGolden(t, "ggml/sha256.txt"))), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			sums[f[1]] = f[0]
		}
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, typ := range Types() {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := Quantize(typ, in)
			if err != nil {
				t.Fatal(err)
			}
			if typ == F32 {
				if want := sums["f32.bin"]; sum(q) != want {
					t.Errorf("f32 bytes: sha256 %s, ggml %s", sum(q), want)
				}
			} else {
				want := readGolden(t, "ggml/"+typ.String()+".bin")
				if !bytes.Equal(q, want) {
					t.Errorf("quantized: %s", firstDiff(typ, q, want))
				}
			}
			deq := make([]float32, len(in))
			if err := Dequantize(typ, q, deq); err != nil {
				t.Fatal(err)
			}
			if got, want := sum(f32bytes(deq)), sums[typ.String()+".dequant.f32"]; got != want {
				t.Errorf("dequantized inputs: sha256 %s, ggml %s", got, want)
			}
			nb := len(rnd) / typ.BlockBytes()
			rdeq := make([]float32, nb*typ.BlockSize())
			if err := Dequantize(typ, rnd[:nb*typ.BlockBytes()], rdeq); err != nil {
				t.Fatal(err)
			}
			if got, want := sum(f32bytes(rdeq)), sums[typ.String()+".random.f32"]; got != want {
				t.Errorf("dequantized random blocks: sha256 %s, ggml %s", got, want)
			}
		})
	}
}

func firstDiff(typ Type, got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, ggml %d", len(got), len(want))
	}
	bb := typ.BlockBytes()
	for i := range got {
		if got[i] != want[i] {
			blk := i / bb
			return fmt.Sprintf("block %d (row %d) differs at byte %d:\n got  %x\n ggml %x",
				blk, blk*typ.BlockSize()/goldenPerRow, i%bb, got[blk*bb:(blk+1)*bb], want[blk*bb:(blk+1)*bb])
		}
	}
	return "equal"
}
