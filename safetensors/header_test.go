package safetensors

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// rawFile assembles a safetensors file from a header text and a data buffer, without any
// validation, so tests can craft broken files.
func rawFile(header string, data []byte) []byte {
	out := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

func TestParseHeaderValid(t *testing.T) {
	hdr := `{"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},` +
		`"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8],"extra":true},"s":{"dtype":"I8","shape":[],"data_offsets":[12,13]},` +
		`"z":{"dtype":"F64","shape":[0,5],"data_offsets":[13,13]}}   `
	h, err := ParseHeader([]byte(hdr), 13)
	if err != nil {
		t.Fatal(err)
	}
	want := []TensorInfo{
		{Name: "a", DType: F32, Shape: []int{1, 2}, Offsets: [2]int64{0, 8}},
		{Name: "b", DType: F16, Shape: []int{2}, Offsets: [2]int64{8, 12}},
		{Name: "s", DType: I8, Shape: []int{}, Offsets: [2]int64{12, 13}},
		{Name: "z", DType: F64, Shape: []int{0, 5}, Offsets: [2]int64{13, 13}},
	}
	if !reflect.DeepEqual(h.Tensors, want) {
		t.Errorf("tensors = %+v\nwant %+v", h.Tensors, want)
	}
	if !reflect.DeepEqual(h.Metadata, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %v", h.Metadata)
	}
	if info, ok := h.Find("b"); !ok || info.ByteLen() != 4 || info.NumElements() != 2 {
		t.Errorf("Find(b) = %+v, %v", info, ok)
	}
	if _, ok := h.Find("c"); ok {
		t.Error("Find(c) found a tensor that does not exist")
	}
	if h, err := ParseHeader([]byte(`{}`), 0); err != nil || len(h.Tensors) != 0 {
		t.Errorf("empty header: %v, %v", h, err)
	}
}

func TestParseHeaderErrors(t *testing.T) {
	f32 := func(name string, shape string, b, e int) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":[` + strconv.Itoa(b) + `,` + strconv.Itoa(e) + `]}`
	}
	cases := []struct {
		name    string
		header  string
		dataLen int64
		want    error
		mention string
	}{
		{"not an object", `[1,2]`, 0, ErrInvalidHeader, "begin"},
		{"bad json", `{"a":`, 0, ErrInvalidHeader, ""},
		{"invalid utf8", "{\"\xff\":1}", 0, ErrInvalidHeader, "UTF-8"},
		{"trailing garbage", `{} x`, 0, ErrInvalidHeader, "after"},
		{"second object", `{}{}`, 0, ErrInvalidHeader, "after"},
		{"entry not object", `{"a":[1]}`, 0, ErrInvalidHeader, `"a"`},
		{"entry null", `{"a":null}`, 0, ErrInvalidHeader, `"a"`},
		{"missing dtype", `{"a":{"shape":[1],"data_offsets":[0,4]}}`, 4, ErrInvalidHeader, `"a"`},
		{"dtype not string", `{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, 4, ErrInvalidHeader, `"a"`},
		{"unknown dtype", `{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}`, 4, ErrDtype, `F99`},
		{"lowercase dtype", `{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, 4, ErrDtype, `"a"`},
		{"negative dim", `{` + f32("a", "[-1]", 0, 4) + `}`, 4, ErrShape, `"a"`},
		{"fractional dim", `{` + f32("a", "[1.0]", 0, 4) + `}`, 4, ErrShape, `"a"`},
		{"string dim", `{` + f32("a", `["1"]`, 0, 4) + `}`, 4, ErrShape, `"a"`},
		{"shape not array", `{` + f32("a", `1`, 0, 4) + `}`, 4, ErrShape, `"a"`},
		{"shape overflow", `{` + f32("a", "[4294967296,4294967296]", 0, 4) + `}`, 4, ErrShape, "overflow"},
		{"huge dim", `{` + f32("a", "[99999999999999999999]", 0, 4) + `}`, 4, ErrShape, `"a"`},
		{"shape size mismatch", `{` + f32("a", "[2]", 0, 4) + `}`, 4, ErrShape, "needs 8 bytes"},
		{"offsets begin after end", `{` + f32("a", "[0]", 4, 0) + `}`, 4, ErrOffsets, "begin after end"},
		{"offsets three", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 8, ErrOffsets, `"a"`},
		{"offsets negative", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, 8, ErrOffsets, `"a"`},
		{"offsets beyond buffer", `{` + f32("a", "[2]", 0, 8) + `}`, 4, ErrTruncated, "beyond"},
		{"overlap", `{` + f32("a", "[2]", 0, 8) + `,` + f32("b", "[2]", 4, 12) + `}`, 12, ErrOverlap, `"b"`},
		{"same range", `{` + f32("a", "[1]", 0, 4) + `,` + f32("b", "[1]", 0, 4) + `}`, 4, ErrOverlap, `"b"`},
		{"empty inside other", `{` + f32("a", "[2]", 0, 8) + `,` + f32("b", "[0]", 4, 4) + `}`, 8, ErrOverlap, `"b"`},
		{"hole", `{` + f32("a", "[1]", 0, 4) + `,` + f32("b", "[1]", 8, 12) + `}`, 12, ErrOffsets, "[4, 8)"},
		{"leading hole", `{` + f32("a", "[1]", 4, 8) + `}`, 8, ErrOffsets, "[0, 4)"},
		{"trailing bytes", `{` + f32("a", "[1]", 0, 4) + `}`, 8, ErrOffsets, "[4, 8)"},
		{"duplicate name", `{` + f32("a", "[1]", 0, 4) + `,` + f32("a", "[1]", 4, 8) + `}`, 8, ErrInvalidHeader, "twice"},
		{"metadata not strings", `{"__metadata__":{"a":1}}`, 0, ErrInvalidHeader, "__metadata__"},
		{"metadata twice", `{"__metadata__":{},"__metadata__":{}}`, 0, ErrInvalidHeader, "duplicate"},
		{"negative data length", `{}`, -1, ErrInvalidHeader, "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader([]byte(c.header), c.dataLen)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err %q should start with \"safetensors: \" and mention %q", err, c.mention)
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	seeds := []struct {
		h string
		n int64
	}{
		{`{}`, 0},
		{`{"__metadata__":{"format":"pt"}}`, 0},
		{`{"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}}`, 8},
		{`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[],"data_offsets":[4,6]}}  `, 6},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12},
		{`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8},
		{`{"a":{"dtype":"X","shape":[1],"data_offsets":[0,4]}}`, 4},
		{`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4},
		{`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4},
		{`{"a":`, 0},
		{"{\"\xff\":1}", 0},
		{`{"a":{"dtype":"I64","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}`, 3},
	}
	for _, s := range seeds {
		f.Add([]byte(s.h), s.n)
	}
	f.Fuzz(func(t *testing.T, header []byte, dataLen int64) {
		h, err := ParseHeader(header, dataLen)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		// Invariants of an accepted header: sorted unique names, sizes consistent, the
		// tensors tile [0, dataLen).
		var total int64
		for i, ti := range h.Tensors {
			if i > 0 && h.Tensors[i-1].Name >= ti.Name {
				t.Fatalf("names not sorted/unique: %q, %q", h.Tensors[i-1].Name, ti.Name)
			}
			if ti.Offsets[0] < 0 || ti.Offsets[0] > ti.Offsets[1] || ti.Offsets[1] > dataLen {
				t.Fatalf("tensor %q offsets %v outside [0, %d]", ti.Name, ti.Offsets, dataLen)
			}
			if ti.NumElements()*int64(ti.DType.Size()) != ti.ByteLen() {
				t.Fatalf("tensor %q: %v x %s != %d bytes", ti.Name, ti.Shape, ti.DType, ti.ByteLen())
			}
			total += ti.ByteLen()
		}
		if total != dataLen {
			t.Fatalf("tensors cover %d bytes of %d", total, dataLen)
		}
	})
}
