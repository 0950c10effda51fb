package comm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func mustTensor(t testing.TB, shape ...int) *tensor.Dense {
	t.Helper()
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(i)*0.25 - 3
	}
	return d
}

func messagesEqual(a, b Message) bool {
	if a.Sample != b.Sample || a.Step != b.Step || a.Tag != b.Tag || len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for i := range a.Tensors {
		if a.Tensors[i].Name != b.Tensors[i].Name || !tensor.BitEqual(a.Tensors[i].Tensor, b.Tensors[i].Tensor) {
			return false
		}
	}
	return true
}

func TestMessageRoundTrip(t *testing.T) {
	nan := tensor.New(3)
	nan.Data[0] = float32(math.NaN())
	nan.Data[1] = float32(math.Copysign(0, -1))
	nan.Data[2] = float32(math.Inf(-1))
	tests := []struct {
		name string
		m    Message
	}{
		{"empty", Message{Sample: 7, Step: -1}},
		{"tagged empty", Message{Sample: 7, Step: 3, Tag: 0xffff}},
		{"tagged", Message{Sample: -9, Step: 1, Tag: 513, Tensors: []NamedTensor{{"a", mustTensor(t, 3)}, {"b", mustTensor(t, 1, 2)}}}},
		{"scalar", Message{Sample: 1, Step: 2, Tensors: []NamedTensor{{"s", &tensor.Dense{Data: []float32{42}}}}}},
		{"latent", Message{Sample: 1 << 40, Step: 24, Tensors: []NamedTensor{{"latent", mustTensor(t, 1, 2, 4, 8, 8)}}}},
		{"several", Message{Sample: -3, Step: 5, Tensors: []NamedTensor{
			{"latent", mustTensor(t, 2, 3)}, {"", mustTensor(t, 0, 5)}, {"ünïcode", nan}, {"big", mustTensor(t, 70000)}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AppendMessage([]byte("prefix"), tc.m, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := MessageLen(tc.m); len(b) != want+6 {
				t.Fatalf("encoded %d bytes, MessageLen says %d", len(b)-6, want)
			}
			// Through the stream reader with a small buffer (forces chunked payloads).
			fr := NewFrameReader(bytes.NewReader(b[6:]), 4096, 0)
			got, err := fr.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if !messagesEqual(got, tc.m) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.m)
			}
			if _, err := fr.ReadMessage(); err != io.EOF {
				t.Fatalf("after the message: %v, want io.EOF", err)
			}
			// Frame by frame through DecodeFrame.
			rest := b[6:]
			for i := 0; len(rest) > 0; i++ {
				f, n, err := DecodeFrame(rest, 0)
				if err != nil {
					t.Fatal(err)
				}
				if f.Sample != tc.m.Sample || f.Step != tc.m.Step || f.Tag != tc.m.Tag || f.Count != len(tc.m.Tensors) || (f.Count > 0 && f.Index != i) {
					t.Fatalf("frame %d header %+v", i, f)
				}
				rest = rest[n:]
			}
		})
	}
}

func TestAppendMessageRejects(t *testing.T) {
	long := string(make([]byte, MaxNameLen+1))
	tests := []struct {
		name string
		m    Message
		max  int
	}{
		{"nil tensor", Message{Tensors: []NamedTensor{{"x", nil}}}, 0},
		{"shape mismatch", Message{Tensors: []NamedTensor{{"x", &tensor.Dense{Shape: []int{2, 2}, Data: make([]float32, 3)}}}}, 0},
		{"negative dim", Message{Tensors: []NamedTensor{{"x", &tensor.Dense{Shape: []int{-1}, Data: nil}}}}, 0},
		{"too many dims", Message{Tensors: []NamedTensor{{"x", mustTensor(t, 1, 1, 1, 1, 1, 1, 1, 1, 1)}}}, 0},
		{"long name", Message{Tensors: []NamedTensor{{long, mustTensor(t, 1)}}}, 0},
		{"bad utf8", Message{Tensors: []NamedTensor{{"\xff", mustTensor(t, 1)}}}, 0},
		{"too large", Message{Tensors: []NamedTensor{{"x", mustTensor(t, 1000)}}}, 1000},
		{"too many tensors", Message{Tensors: make([]NamedTensor, MaxTensors+1)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := AppendMessage(nil, tc.m, tc.max); !errors.Is(err, ErrBadFrame) {
				t.Fatalf("err = %v, want ErrBadFrame", err)
			}
		})
	}
}

// resum recomputes the header checksum after a test tampered with the header.
func resum(b []byte) []byte {
	ndim := int(b[7])
	nameLen := int(binary.LittleEndian.Uint16(b[24:]))
	off := fixedHeaderLen + 8*ndim + nameLen
	binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b[:off], castagnoli))
	return b
}

func TestDecodeFrameRejects(t *testing.T) {
	good, err := AppendMessage(nil, Message{Sample: 1, Step: 2, Tensors: []NamedTensor{{"lat", mustTensor(t, 2, 3)}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := AppendMessage(nil, Message{Sample: 1}, 0)
	mod := func(src []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), src...)) }
	tests := []struct {
		name string
		b    []byte
		max  int
	}{
		{"empty input", nil, 0},
		{"truncated header", good[:20], 0},
		{"truncated payload", good[:len(good)-1], 0},
		{"magic", mod(good, func(b []byte) []byte { b[0] = 'X'; return resum(b) }), 0},
		{"version", mod(good, func(b []byte) []byte { b[4] = 9; return resum(b) }), 0},
		{"dtype", mod(good, func(b []byte) []byte { b[6] = 7; return resum(b) }), 0},
		{"ndim", mod(good, func(b []byte) []byte { b[7] = MaxNDim + 1; return b }), 0},
		{"index >= count", mod(good, func(b []byte) []byte { b[20] = 1; return resum(b) }), 0},
		{"count too big", mod(good, func(b []byte) []byte { binary.LittleEndian.PutUint16(b[22:], MaxTensors+1); return resum(b) }), 0},
		{"name too long", mod(good, func(b []byte) []byte { binary.LittleEndian.PutUint16(b[24:], MaxNameLen+1); return b }), 0},
		{"payload crc", mod(good, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0},
		{"header crc", mod(good, func(b []byte) []byte { b[9] ^= 1; return b }), 0},
		{"length != shape", mod(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[40:], 3); return resum(b) }), 0},
		{"huge dim", mod(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[40:], 1<<62); return resum(b) }), 0},
		{"huge payload length", mod(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[32:], 1<<40); return resum(b) }), 0},
		{"over max frame size", good, 32},
		{"empty frame with payload", mod(empty, func(b []byte) []byte { b[6] = 1; return resum(b) }), 0},
		{"bad utf8 name", mod(good, func(b []byte) []byte { b[fixedHeaderLen+16] = 0xff; return resum(b) }), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeFrame(tc.b, tc.max); !errors.Is(err, ErrBadFrame) {
				t.Fatalf("err = %v, want ErrBadFrame", err)
			}
		})
	}
}

func TestReadMessageRejectsMixedFrames(t *testing.T) {
	a, _ := AppendMessage(nil, Message{Sample: 1, Tensors: []NamedTensor{{"a", mustTensor(t, 2)}, {"b", mustTensor(t, 2)}}}, 0)
	b, _ := AppendMessage(nil, Message{Sample: 2, Tensors: []NamedTensor{{"a", mustTensor(t, 2)}, {"b", mustTensor(t, 2)}}}, 0)
	c, _ := AppendMessage(nil, Message{Sample: 1, Tag: 4, Tensors: []NamedTensor{{"a", mustTensor(t, 2)}, {"b", mustTensor(t, 2)}}}, 0)
	_, n, _ := DecodeFrame(a, 0)
	_, m, _ := DecodeFrame(b, 0)
	_, k, _ := DecodeFrame(c, 0)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"foreign second frame", append(append([]byte(nil), a[:n]...), b[m:]...), ErrBadFrame},
		{"second frame of another tag", append(append([]byte(nil), a[:n]...), c[k:]...), ErrBadFrame},
		{"starts with second frame", a[n:], ErrBadFrame},
		{"cut after first frame", a[:n], io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewFrameReader(bytes.NewReader(tc.in), 0, 0).ReadMessage(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzDecodeFrame(f *testing.F) {
	seeds := []Message{
		{Sample: 3, Step: 1},
		{Sample: 4, Step: 2, Tag: 77, Tensors: []NamedTensor{{"all-gather", mustTensor(f, 2)}}},
		{Sample: 1, Step: 2, Tensors: []NamedTensor{{"latent", mustTensor(f, 1, 2, 3)}}},
		{Sample: -1, Step: 9, Tensors: []NamedTensor{{"s", &tensor.Dense{Data: []float32{1}}}, {"z", mustTensor(f, 0, 4)}}},
	}
	for _, m := range seeds {
		b, err := AppendMessage(nil, m, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("VDPF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFrame = 1 << 20
		fr, n, err := DecodeFrame(data, maxFrame)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v does not wrap ErrBadFrame", err)
			}
		} else {
			// A frame that decodes re-encodes to the same bytes.
			again := appendFrame(nil, fr.Sample, fr.Step, fr.Tag, fr.Index, fr.Count, fr.Name, fr.DType, fr.Shape, fr.Data)
			if !bytes.Equal(again, data[:n]) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, data[:n])
			}
		}
		// The stream reader must agree and never panic either.
		rd := NewFrameReader(bytes.NewReader(data), 4096, maxFrame)
		for range 4 {
			if _, err := rd.ReadMessage(); err != nil {
				break
			}
		}
	})
}
