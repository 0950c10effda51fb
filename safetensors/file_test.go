package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func mustDense(t *testing.T, data []float32, shape ...int) *tensor.Dense {
	t.Helper()
	d, err := tensor.FromData(data, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// openers lists the ways a File can be obtained from bytes on disk.
func openers() map[string]func(path string) (*File, error) {
	return map[string]func(string) (*File, error){
		"mmap": Open,
		"read": Opener{}.Open,
		"mapfail": Opener{Map: func(*os.File, int64) ([]byte, func() error, error) {
			return nil, nil, errors.New("no mmap today")
		}}.Open,
		"bytes": func(path string) (*File, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			return OpenBytes(path, b)
		},
	}
}

func TestWriteOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	in := []NamedTensor{
		{"w", mustDense(t, []float32{1, -2.5, 3, float32(math.Inf(-1)), 1e-40, 6}, 2, 3)},
		{"b", mustDense(t, []float32{0.125}, 1)},
		{"scalar", &tensor.Dense{Data: []float32{7}}},
		{"empty", mustDense(t, []float32{}, 0, 4)},
	}
	meta := map[string]string{"format": "pt", "note": "<é>"}
	if err := WriteFile(path, in, meta); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 {
		t.Errorf("data buffer starts at %d, not a multiple of 8", 8+n)
	}
	for name, open := range openers() {
		t.Run(name, func(t *testing.T) {
			f, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, want := f.Names(), []string{"b", "empty", "scalar", "w"}; !reflect.DeepEqual(got, want) {
				t.Errorf("Names = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(f.Metadata(), meta) {
				t.Errorf("Metadata = %v, want %v", f.Metadata(), meta)
			}
			for _, nt := range in {
				got, err := f.Tensor(nt.Name)
				if err != nil {
					t.Fatal(err)
				}
				if got.Len() != nt.Tensor.Len() || !reflect.DeepEqual(append([]int{}, got.Shape...), append([]int{}, nt.Tensor.Shape...)) {
					t.Fatalf("%s: got %v, want %v", nt.Name, got, nt.Tensor)
				}
				for i := range got.Data {
					if math.Float32bits(got.Data[i]) != math.Float32bits(nt.Tensor.Data[i]) {
						t.Fatalf("%s[%d] = %g, want %g", nt.Name, i, got.Data[i], nt.Tensor.Data[i])
					}
				}
				info, ok := f.Info(nt.Name)
				if !ok || info.DType != F32 {
					t.Errorf("Info(%s) = %+v, %v", nt.Name, info, ok)
				}
				if info.Offsets[0]%4 != 0 {
					t.Errorf("%s not aligned: %v", nt.Name, info.Offsets)
				}
			}
		})
	}
}

// TestWriteMapFile: a name -> tensor map comes back whole, the file's tensors in name order.
func TestWriteMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	in := map[string]*tensor.Dense{"z": mustDense(t, []float32{1, 2}, 2), "a": mustDense(t, []float32{3}, 1), "m": mustDense(t, []float32{4, 5, 6}, 3)}
	if err := WriteMapFile(path, in, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var offsets []int64
	for _, n := range []string{"a", "m", "z"} {
		got, err := f.Tensor(n)
		if err != nil || !tensor.BitEqual(got, in[n]) {
			t.Fatalf("%s: %v (%v), want %v", n, got, err, in[n])
		}
		info, _ := f.Info(n)
		offsets = append(offsets, info.Offsets[0])
	}
	if !slices.IsSorted(offsets) || f.Len() != 3 {
		t.Fatalf("data offsets %v of %d tensors: not in name order", offsets, f.Len())
	}
}

func TestWriteRawDtypes(t *testing.T) {
	vals := []float32{1, -0.5, 65504, 1e-7, float32(math.Inf(1)), 3.14159}
	f16 := make([]byte, 2*len(vals))
	bf16 := make([]byte, 2*len(vals))
	f64 := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(f16[2*i:], Float32ToHalf(v))
		binary.LittleEndian.PutUint16(bf16[2*i:], Float32ToBFloat16(v))
		binary.LittleEndian.PutUint64(f64[8*i:], math.Float64bits(float64(v)))
	}
	ints := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	var buf bytes.Buffer
	err := WriteRaw(&buf, []RawTensor{
		{"h", F16, []int{2, 3}, f16},
		{"bf", BF16, []int{6}, bf16},
		{"d", F64, []int{3, 2}, f64},
		{"i", I64, []int{1}, ints},
		{"u", U8, []int{3}, []byte{1, 2, 3}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("mem", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata() != nil {
		t.Errorf("metadata = %v, want nil", f.Metadata())
	}
	check := func(name string, conv func(float32) float32) {
		got, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if got[i] != conv(v) {
				t.Errorf("%s[%d] = %g, want %g", name, i, got[i], conv(v))
			}
		}
	}
	check("h", func(v float32) float32 { return HalfToFloat32(Float32ToHalf(v)) })
	check("bf", func(v float32) float32 { return BFloat16ToFloat32(Float32ToBFloat16(v)) })
	check("d", func(v float32) float32 { return v })
	if _, err := f.Float32("i"); !errors.Is(err, ErrDtype) || !strings.Contains(err.Error(), `"i"`) {
		t.Errorf("Float32(I64) err = %v, want ErrDtype naming the tensor", err)
	}
	if b, err := f.Bytes("u"); err != nil || !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("Bytes(u) = %v, %v", b, err)
	}
	// Every tensor is aligned to its element size.
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		if info.Offsets[0]%int64(info.DType.Size()) != 0 {
			t.Errorf("%s (%s) at offset %d is misaligned", n, info.DType, info.Offsets[0])
		}
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		raw  []RawTensor
		meta map[string]string
	}{
		{"unknown dtype", []RawTensor{{"a", "F99", []int{1}, []byte{0}}}, nil},
		{"size mismatch", []RawTensor{{"a", F32, []int{2}, make([]byte, 4)}}, nil},
		{"negative dim", []RawTensor{{"a", F32, []int{-1}, nil}}, nil},
		{"empty name", []RawTensor{{"", U8, []int{1}, []byte{0}}}, nil},
		{"reserved name", []RawTensor{{"__metadata__", U8, []int{1}, []byte{0}}}, nil},
		{"duplicate", []RawTensor{{"a", U8, []int{1}, []byte{0}}, {"a", U8, []int{1}, []byte{0}}}, nil},
		{"bad utf8 name", []RawTensor{{"\xff", U8, []int{1}, []byte{0}}}, nil},
		{"bad utf8 metadata", nil, map[string]string{"k": "\xff"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := WriteRaw(&bytes.Buffer{}, c.raw, c.meta); !errors.Is(err, ErrInvalidTensor) {
				t.Errorf("err = %v, want ErrInvalidTensor", err)
			}
		})
	}
	if err := Write(&bytes.Buffer{}, []NamedTensor{{"a", &tensor.Dense{Shape: []int{3}, Data: []float32{1}}}}, nil); !errors.Is(err, ErrInvalidTensor) {
		t.Errorf("Write with inconsistent Dense: err = %v", err)
	}
	// A failed WriteFile leaves nothing behind.
	dir := t.TempDir()
	if err := WriteRawFile(filepath.Join(dir, "x.safetensors"), cases[0].raw, nil); err == nil {
		t.Fatal("WriteRawFile accepted an unknown dtype")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed write left %d files", len(ents))
	}
}

func TestOpenErrors(t *testing.T) {
	good := func() []byte {
		var buf bytes.Buffer
		if err := Write(&buf, []NamedTensor{{"t", mustDense(t, []float32{1, 2, 3, 4}, 4)}}, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}()
	hdrLen := func(n uint64) []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, n); return b }
	cases := []struct {
		name    string
		content []byte
		want    error
		mention string
	}{
		{"empty file", nil, ErrTruncated, "8-byte"},
		{"short file", []byte{1, 2, 3}, ErrTruncated, "8-byte"},
		{"header length beyond file", append(hdrLen(1000), `{}`...), ErrTruncated, "1000"},
		{"header length huge", append(hdrLen(1<<62), `{}`...), ErrInvalidHeader, "limit"},
		{"header length one", append(hdrLen(1), '{'), ErrInvalidHeader, "minimum"},
		{"truncated data", good[:len(good)-4], ErrTruncated, `"t"`},
		{"extra data", append(append([]byte{}, good...), 0, 0, 0, 0), ErrOffsets, "no tensor"},
		{"bad json", rawFile(`{"t":{`, nil), ErrInvalidHeader, ""},
		{"unknown dtype", rawFile(`{"t":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), ErrDtype, `"t"`},
		{"shape mismatch", rawFile(`{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), ErrShape, `"t"`},
		{"overlap", rawFile(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), ErrOverlap, `"u"`},
		{"offsets out of range", rawFile(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 8)), ErrTruncated, `"t"`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
		if err := os.WriteFile(path, c.content, 0o644); err != nil {
			t.Fatal(err)
		}
		for oname, open := range openers() {
			t.Run(c.name+"/"+oname, func(t *testing.T) {
				f, err := open(path)
				if err == nil {
					f.Close()
					t.Fatal("opened a broken file")
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.mention) {
					t.Errorf("err %q should name the file and mention %q", err, c.mention)
				}
			})
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestNotFoundAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.safetensors")
	if err := WriteFile(path, []NamedTensor{{"t", mustDense(t, []float32{1, 2}, 2)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Float32("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), path) {
		t.Errorf("missing tensor: err = %v", err)
	}
	if _, ok := f.Info("nope"); ok {
		t.Error("Info found a missing tensor")
	}
	// Concurrent readers while closing: no crash, each call either succeeds or says closed.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if _, err := f.Float32("t"); err != nil && !errors.Is(err, ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, call := range []func() error{
		func() error { _, err := f.Bytes("t"); return err },
		func() error { _, err := f.Float32("t"); return err },
		func() error { _, err := f.Tensor("t"); return err },
	} {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: err = %v, want ErrClosed", err)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := f.Names(); len(got) != 1 {
		t.Errorf("Names after Close = %v", got)
	}
}

// TestFloat32Independent: converted data does not alias the mapping.
func TestFloat32Independent(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, []NamedTensor{{"t", mustDense(t, []float32{1, 2}, 2)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("mem", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Float32("t")
	a[0] = 99
	b, _ := f.Float32("t")
	if b[0] != 1 {
		t.Errorf("Float32 aliases the file data: %v", b)
	}
}

func FuzzOpenBytes(f *testing.F) {
	var buf bytes.Buffer
	_ = Write(&buf, []NamedTensor{{"a", &tensor.Dense{Shape: []int{2}, Data: []float32{1, 2}}}}, map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(rawFile(`{}`, nil))
	f.Add(rawFile(`{"t":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 0x3c}))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := OpenBytes("fuzz", b)
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			info, _ := file.Info(n)
			raw, err := file.Bytes(n)
			if err != nil || int64(len(raw)) != info.ByteLen() {
				t.Fatalf("%s: %d bytes, %v", n, len(raw), err)
			}
			if info.DType.IsFloat() {
				v, err := file.Float32(n)
				if err != nil || int64(len(v)) != info.NumElements() {
					t.Fatalf("%s: %d floats, %v", n, len(v), err)
				}
			}
		}
	})
}
