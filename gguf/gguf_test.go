package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor/quant"
)

// sample writes a small file with every kind of metadata and tensors of several types.
func sample(t testing.TB) (*Writer, map[string][]float32) {
	t.Helper()
	w := NewWriter()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Set("general.architecture", String("wan")))
	must(w.Set("general.quantization_version", Uint32(2)))
	must(w.Set("general.file_type", Uint32(7)))
	must(w.Set("x.f32", Float32(0.5)))
	must(w.Set("x.i32", Int32(-3)))
	must(w.Set("x.u64", Uint64(1<<40)))
	must(w.Set("x.bool", Bool(true)))
	must(w.Set("x.names", Strings("a", "bc", "")))
	must(w.Set(OrigShapePrefix+"conv.weight", Int32s(4, 2, 1, 2, 2)))
	x := map[string][]float32{}
	add := func(name string, typ quant.Type, shape []int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*7+len(name)))) * 0.1
		}
		x[name] = v
		must(w.AddFloat32(name, typ, shape, v))
	}
	add("blocks.0.attn1.to_q.weight", quant.Q8_0, []int{3, 64})
	add("blocks.0.ffn.net.0.proj.weight", quant.Q4_K, []int{2, 256})
	add("norm.weight", quant.F32, []int{5})
	add("proj.weight", quant.BF16, []int{2, 3})
	add("emb.weight", quant.F16, []int{7})
	add("conv.weight", quant.F32, []int{8, 4}) // written reshaped: its original shape is in the metadata
	return w, x
}

func writeSample(t testing.TB) (string, map[string][]float32) {
	w, x := sample(t)
	path := filepath.Join(t.TempDir(), "sample.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path, x
}

func TestRoundTrip(t *testing.T) {
	path, x := writeSample(t)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 3 || f.Alignment() != 32 || f.DataOffset()%32 != 0 || f.Architecture() != "wan" {
		t.Errorf("version %d alignment %d data at %d arch %q", f.Version(), f.Alignment(), f.DataOffset(), f.Architecture())
	}
	checks := map[string]string{"x.f32": "0.5", "x.i32": "-3", "x.u64": "1099511627776", "x.bool": "true",
		"x.names": `["a" "bc" ""]`, "general.architecture": `"wan"`}
	for k, want := range checks {
		if v, ok := f.Get(k); !ok || v.String() != want {
			t.Errorf("%s = %v, want %s", k, v, want)
		}
	}
	if names, ok := mustGet(t, f, "x.names").Texts(); !ok || !reflect.DeepEqual(names, []string{"a", "bc", ""}) {
		t.Errorf("x.names = %q", names)
	}
	for name, want := range x {
		info, _ := f.Info(name)
		got, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := quant.Quantize(info.Type, want)
		back := make([]float32, len(want))
		quant.Dequantize(info.Type, q, back)
		if !reflect.DeepEqual(got, back) {
			t.Errorf("%s: read values differ from the written ones", name)
		}
	}
	info, _ := f.Info("blocks.0.attn1.to_q.weight")
	if !reflect.DeepEqual(info.Dims, []int64{64, 3}) || !reflect.DeepEqual(info.Shape(), []int{3, 64}) || info.Size != 3*2*34 {
		t.Errorf("to_q: %+v", info)
	}
	if s, err := f.Shape("conv.weight"); err != nil || !reflect.DeepEqual(s, []int{4, 2, 1, 2, 2}) {
		t.Errorf("conv.weight original shape %v, %v", s, err)
	}
	if s, err := f.Shape("proj.weight"); err != nil || !reflect.DeepEqual(s, []int{2, 3}) {
		t.Errorf("proj.weight shape %v, %v", s, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Bytes("norm.weight"); !errors.Is(err, ErrClosed) {
		t.Errorf("Bytes after Close: %v", err)
	}
	if v, ok := f.Get("x.names"); !ok || v.String() != `["a" "bc" ""]` {
		t.Errorf("metadata after Close: %v", v)
	}
}

func mustGet(t *testing.T, f *File, key string) Value {
	t.Helper()
	v, ok := f.Get(key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return v
}

// header builds a file by hand: the given metadata bytes and tensor table, then data.
func header(version uint32, nT, nKV uint64, body []byte) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nT)
	b = binary.LittleEndian.AppendUint64(b, nKV)
	return append(b, body...)
}

func str(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func tensorEntry(b []byte, name string, dims []uint64, typ uint32, off uint64) []byte {
	b = str(b, name)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(dims)))
	for _, d := range dims {
		b = binary.LittleEndian.AppendUint64(b, d)
	}
	b = binary.LittleEndian.AppendUint32(b, typ)
	return binary.LittleEndian.AppendUint64(b, off)
}

func padTo(b []byte, n int) []byte {
	for len(b)%n != 0 {
		b = append(b, 0)
	}
	return b
}

func TestErrors(t *testing.T) {
	good, _ := writeSample(t)
	gb, _ := os.ReadFile(good)
	kv := func(key string, typ uint32, val []byte) []byte {
		return append(binary.LittleEndian.AppendUint32(str(nil, key), typ), val...)
	}
	oneTensor := func(dims []uint64, typ uint32, off uint64, dataLen int) []byte {
		b := padTo(header(3, 1, 0, tensorEntry(nil, "w", dims, typ, off)), 32)
		return append(b, make([]byte, dataLen)...)
	}
	for _, tc := range []struct {
		name string
		file []byte
		err  error
		msg  string
	}{
		{"empty", nil, ErrFormat, "no GGUF magic"},
		{"magic", []byte("GGML...."), ErrFormat, "no GGUF magic"},
		{"version 1", header(1, 0, 0, nil), ErrFormat, "version 1"},
		{"big-endian", header(0x03000000, 0, 0, nil), ErrFormat, "big-endian"},
		{"short counts", []byte("GGUF\x03\x00\x00\x00\x01"), ErrTruncated, "tensor count"},
		{"huge kv count", header(3, 0, 1<<62, nil), ErrTruncated, "metadata key"},
		{"huge string", header(3, 0, 1, binary.LittleEndian.AppendUint64(nil, 1<<62)), ErrTruncated, "string"},
		{"duplicate key", header(3, 0, 2, append(kv("a", 4, []byte{1, 0, 0, 0}), kv("a", 4, []byte{1, 0, 0, 0})...)), ErrFormat, `"a" twice`},
		{"unknown value type", header(3, 0, 1, kv("a", 13, nil)), ErrFormat, "value type 13"},
		{"huge array", header(3, 0, 1, kv("a", 9, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(nil, 5), 1<<61))), ErrTruncated, "array of"},
		{"alignment type", header(3, 0, 1, kv(AlignmentKey, 5, []byte{32, 0, 0, 0})), ErrFormat, "power of two"},
		{"alignment zero", header(3, 0, 1, kv(AlignmentKey, 4, []byte{0, 0, 0, 0})), ErrFormat, "power of two"},
		{"alignment 3", header(3, 0, 1, kv(AlignmentKey, 4, []byte{3, 0, 0, 0})), ErrFormat, "power of two"},
		{"too many dims", header(3, 1, 0, tensorEntry(nil, "w", make([]uint64, 9), 0, 0)), ErrFormat, `tensor "w": gguf: invalid file: 9 dimensions`},
		{"huge dim", header(3, 1, 0, tensorEntry(nil, "w", []uint64{1 << 63}, 0, 0)), ErrFormat, `tensor "w": gguf: invalid file: dimension 0`},
		{"rows not blocks", oneTensor([]uint64{31, 2}, 8, 0, 1000), ErrType, `tensor "w": gguf: unsupported tensor type: rows of 31`},
		{"unaligned", oneTensor([]uint64{4}, 0, 4, 64), ErrOffsets, "not a multiple"},
		{"truncated data", oneTensor([]uint64{64}, 0, 0, 100), ErrTruncated, `tensor "w": gguf: truncated file: bytes [0, 256)`},
		{"duplicate tensor", header(3, 2, 0, tensorEntry(tensorEntry(nil, "w", []uint64{1}, 0, 0), "w", []uint64{1}, 0, 32)), ErrFormat, `"w" twice`},
		{"overlap", append(padTo(header(3, 2, 0, tensorEntry(tensorEntry(nil, "a", []uint64{16}, 0, 0), "b", []uint64{16}, 0, 32)), 32), make([]byte, 96)...), ErrOffsets, `tensors "a" and "b" share bytes`},
		{"truncated table", gb[:200], ErrTruncated, ""},
	} {
		_, err := OpenBytes("x.gguf", tc.file)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "x.gguf: ") {
			t.Errorf("%s: %v, want %v containing %q", tc.name, err, tc.err, tc.msg)
		}
	}
	// A tensor of a type vdpp does not know opens, and reading it names the type.
	f, err := OpenBytes("x.gguf", oneTensor([]uint64{256}, 16, 0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Bytes("w"); !errors.Is(err, ErrType) || !strings.Contains(err.Error(), `tensor "w": gguf: unsupported tensor type: ggml type 16`) {
		t.Errorf("IQ2_XXS tensor: %v", err)
	}
	// A bad original shape is named.
	w := NewWriter()
	w.Set(OrigShapePrefix+"w", Int32s(3, 3))
	w.AddFloat32("w", quant.F32, []int{8}, make([]float32, 8))
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, _ = OpenBytes("x.gguf", buf.Bytes())
	if _, err := f.Shape("w"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `comfy.gguf.orig_shape.w is [3 3]`) {
		t.Errorf("bad original shape: %v", err)
	}
}

func TestWriterAlignment(t *testing.T) {
	w, _ := sample(t)
	w.Alignment = 64
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("x.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment() != 64 || f.DataOffset()%64 != 0 {
		t.Errorf("alignment %d, data at %d", f.Alignment(), f.DataOffset())
	}
	for _, ti := range f.Tensors() {
		if ti.Offset%64 != 0 {
			t.Errorf("%s at %d", ti.Name, ti.Offset)
		}
	}
	if err := NewWriter().Add("x", quant.Q8_0, []int{2, 16}, make([]byte, 34)); !errors.Is(err, ErrWrite) {
		t.Errorf("rows of 16 as q8_0: %v", err)
	}
}

// FuzzOpen feeds arbitrary bytes to the parser: no panic, and a file that opens reads every
// tensor of a known type within bounds. The seeds: a file of every metadata type with a
// ComfyUI-GGUF original shape, bare headers, and the file stable-diffusion.cpp's convert
// wrote.
func FuzzOpen(f *testing.F) {
	w, _ := sample(f)
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add(header(3, 1, 1, nil))
	f.Add(padTo(header(3, 1, 0, tensorEntry(nil, "w", []uint64{32, 2}, 8, 0)), 32))
	// A file stable-diffusion.cpp's convert wrote (q8_0 and f32 tensors, its metadata).
	if b, err := os.ReadFile(filepath.Join("..", "model", "wan", "transformer", "testdata", "sdcpp", "transformer-q8_0.gguf")); err == nil {
		f.Add(b)
	} else {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := OpenBytes("fuzz.gguf", b)
		if err != nil {
			return
		}
		for _, kv := range g.Metadata() {
			_ = kv.Value.String()
			kv.Value.Ints()
			kv.Value.Texts()
		}
		for _, ti := range g.Tensors() {
			g.Shape(ti.Name)
			if ti.Size < 0 {
				continue
			}
			if _, err := g.Float32(ti.Name); err != nil {
				t.Fatalf("%s: %v", ti.Name, err)
			}
		}
	})
}

// TestAddFunc: a tensor whose data is written at WriteTo reads back as filled.
func TestAddFunc(t *testing.T) {
	w := NewWriter()
	if err := w.AddFunc("q", quant.Q8_0, []int{2, 32}, func(dst []byte) error {
		for i := range dst {
			dst[i] = byte(i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddFunc("bad", quant.Q8_0, []int{2, 31}, nil); !errors.Is(err, ErrWrite) {
		t.Errorf("rows of 31 as q8_0: %v", err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("x.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Bytes("q")
	if len(b) != 68 || b[0] != 0 || b[67] != 67 {
		t.Errorf("q: %d bytes %v", len(b), b[:4])
	}
}
