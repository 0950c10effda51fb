package comm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/vdpp/vdpp/tensor"
)

// Wire frame layout (all integers little endian). One frame carries one tensor of a
// Message; a Message of n tensors is n frames with Index 0..n-1 and Count n; a Message with
// no tensors is one frame with Count 0, DType none, no dims, no name and no payload.
//
//	off size field
//	  0    4 magic "VDPF"
//	  4    2 version (FrameVersion)
//	  6    1 dtype (DTypeNone, DTypeFloat32)
//	  7    1 ndim (<= MaxNDim)
//	  8    8 sample id (int64)
//	 16    4 step (int32)
//	 20    2 tensor index within the message
//	 22    2 tensor count of the message (<= MaxTensors)
//	 24    2 name length in bytes (<= MaxNameLen, UTF-8)
//	 26    2 channel tag (Message.Tag; 0 is the default channel)
//	 28    4 CRC32-C of the payload
//	 32    8 payload length in bytes (== product(shape) * dtype size)
//	 40 8*nd shape, one uint64 per dim
//	  .   nl name
//	  .    4 CRC32-C of every header byte before it
//	  .  len payload
//
// Bytes 26-27 were "reserved, must be 0" before channel tags existed, so a frame of the
// default channel (tag 0) is byte for byte what earlier builds wrote, and the version stays 1.
//
// A control frame is the transport's own (heartbeats, goodbye, abort), never a message: dtype
// DTypeControl, tensor count 0, no dims, no name, no payload; its tensor index field holds
// the control kind and its sample and step fields the kind's values.
const (
	frameMagic     = "VDPF"
	FrameVersion   = 1
	fixedHeaderLen = 40
	// MaxNDim bounds the rank of a tensor on the wire.
	MaxNDim = 8
	// MaxNameLen bounds a tensor name on the wire, in bytes.
	MaxNameLen = 256
	// MaxTensors bounds the tensors of one message.
	MaxTensors = 1024
	// DefaultMaxFrameSize bounds one encoded frame unless the caller says otherwise.
	DefaultMaxFrameSize = 1 << 30
	// maxHeaderLen is the largest header, fixed part + dims + name + header CRC.
	maxHeaderLen = fixedHeaderLen + 8*MaxNDim + MaxNameLen + 4
	// initialPayloadCap bounds what the decoder allocates before the bytes arrive (elements).
	initialPayloadCap = 4 << 20
)

// DType is the element type of a tensor on the wire.
type DType uint8

// Element types. Only float32 is produced today; the byte leaves room for others.
const (
	DTypeNone    DType = 0
	DTypeFloat32 DType = 1
	// DTypeControl marks a control frame of the transport (see the layout above).
	DTypeControl DType = 0xff
)

// Size returns the size of one element in bytes (0 for an unknown or empty type).
func (d DType) Size() int {
	if d == DTypeFloat32 {
		return 4
	}
	return 0
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame is one decoded wire frame.
type Frame struct {
	Sample int64
	Step   int32
	Tag    uint16 // channel tag of the message (0: the default channel)
	Index  int    // position of the tensor in its message
	Count  int    // tensors in the message (0: a message without tensors)
	Name   string
	DType  DType
	Shape  []int // nil for a scalar
	Data   []float32
}

// FrameLen returns the encoded size of a frame with ndim dims, a nameLen-byte name and n
// float32 elements.
func FrameLen(ndim, nameLen, n int) int { return fixedHeaderLen + 8*ndim + nameLen + 4 + 4*n }

// MessageLen returns the encoded size of m, or an error when m cannot be encoded.
func MessageLen(m Message) (int, error) {
	if len(m.Tensors) == 0 {
		return FrameLen(0, 0, 0), nil
	}
	if len(m.Tensors) > MaxTensors {
		return 0, fmt.Errorf("%w: %d tensors, max %d", ErrBadFrame, len(m.Tensors), MaxTensors)
	}
	total := 0
	for i, nt := range m.Tensors {
		if err := checkTensor(nt); err != nil {
			return 0, fmt.Errorf("tensor %d: %w", i, err)
		}
		total += FrameLen(len(nt.Tensor.Shape), len(nt.Name), len(nt.Tensor.Data))
	}
	return total, nil
}

func checkTensor(nt NamedTensor) error {
	t := nt.Tensor
	switch {
	case t == nil:
		return fmt.Errorf("%w: tensor %q is nil", ErrBadFrame, nt.Name)
	case len(nt.Name) > MaxNameLen:
		return fmt.Errorf("%w: name of %d bytes, max %d", ErrBadFrame, len(nt.Name), MaxNameLen)
	case !utf8.ValidString(nt.Name):
		return fmt.Errorf("%w: name %q is not UTF-8", ErrBadFrame, nt.Name)
	case len(t.Shape) > MaxNDim:
		return fmt.Errorf("%w: tensor %q has %d dims, max %d", ErrBadFrame, nt.Name, len(t.Shape), MaxNDim)
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && n > math.MaxInt/d) {
			return fmt.Errorf("%w: tensor %q has shape %v", ErrBadFrame, nt.Name, t.Shape)
		}
		n *= d
	}
	if n != len(t.Data) {
		return fmt.Errorf("%w: tensor %q shape %v needs %d elements, has %d", ErrBadFrame, nt.Name, t.Shape, n, len(t.Data))
	}
	return nil
}

// AppendMessage appends the frames of m to dst. A frame larger than maxFrameSize
// (DefaultMaxFrameSize when <= 0) is an error wrapping ErrBadFrame.
func AppendMessage(dst []byte, m Message, maxFrameSize int) ([]byte, error) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	total, err := MessageLen(m)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, total)
	if len(m.Tensors) == 0 {
		return appendFrame(dst, m.Sample, m.Step, m.Tag, 0, 0, "", DTypeNone, nil, nil), nil
	}
	for i, nt := range m.Tensors {
		if l := FrameLen(len(nt.Tensor.Shape), len(nt.Name), len(nt.Tensor.Data)); l > maxFrameSize {
			return dst, fmt.Errorf("%w: tensor %q frame of %d bytes exceeds max %d", ErrBadFrame, nt.Name, l, maxFrameSize)
		}
		dst = appendFrame(dst, m.Sample, m.Step, m.Tag, i, len(m.Tensors), nt.Name, DTypeFloat32, nt.Tensor.Shape, nt.Tensor.Data)
	}
	return dst, nil
}

// appendFrame encodes one already validated frame.
func appendFrame(dst []byte, sample int64, step int32, tag uint16, index, count int, name string, dt DType, shape []int, data []float32) []byte {
	start := len(dst)
	hlen := fixedHeaderLen + 8*len(shape) + len(name) + 4
	dst = slices.Grow(dst, hlen+4*len(data))
	dst = dst[:start+hlen+4*len(data)]
	h := dst[start : start+hlen]
	p := dst[start+hlen:]
	p = p[:4*len(data)]
	for i, v := range data {
		binary.LittleEndian.PutUint32(p[4*i:4*i+4], math.Float32bits(v))
	}
	copy(h[0:4], frameMagic)
	binary.LittleEndian.PutUint16(h[4:], FrameVersion)
	h[6] = byte(dt)
	h[7] = byte(len(shape))
	binary.LittleEndian.PutUint64(h[8:], uint64(sample))
	binary.LittleEndian.PutUint32(h[16:], uint32(step))
	binary.LittleEndian.PutUint16(h[20:], uint16(index))
	binary.LittleEndian.PutUint16(h[22:], uint16(count))
	binary.LittleEndian.PutUint16(h[24:], uint16(len(name)))
	binary.LittleEndian.PutUint16(h[26:], tag)
	binary.LittleEndian.PutUint32(h[28:], crc32.Checksum(p, castagnoli))
	binary.LittleEndian.PutUint64(h[32:], uint64(len(p)))
	off := fixedHeaderLen
	for _, d := range shape {
		binary.LittleEndian.PutUint64(h[off:], uint64(d))
		off += 8
	}
	off += copy(h[off:], name)
	binary.LittleEndian.PutUint32(h[off:], crc32.Checksum(h[:off], castagnoli))
	return dst
}

// frameSource is what the decoder reads from: a bufio.Reader or a byte slice.
type frameSource interface {
	// Peek returns the next n bytes without consuming them (fewer with an error).
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	// chunk is the largest Peek the source can serve (a multiple of 4, >= maxHeaderLen).
	chunk() int
	// remaining is the number of bytes left when known, else -1.
	remaining() int
}

// badf returns an error wrapping ErrBadFrame.
func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadFrame}, args...)...)
}

// readFrame decodes one frame from src. Validation failures wrap ErrBadFrame; a clean end
// of input before the first byte is io.EOF; a cut-off frame is io.ErrUnexpectedEOF; other
// read errors are returned as they are. Nothing larger than what the header promises and
// maxFrameSize allows is allocated, and the payload is allocated as it arrives beyond
// initialPayloadCap elements.
func readFrame(src frameSource, maxFrameSize int) (Frame, error) {
	h, err := src.Peek(fixedHeaderLen)
	if err != nil {
		if err == io.EOF && len(h) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	if string(h[0:4]) != frameMagic {
		return Frame{}, badf("magic %q", h[0:4])
	}
	if v := binary.LittleEndian.Uint16(h[4:]); v != FrameVersion {
		return Frame{}, badf("version %d, want %d", v, FrameVersion)
	}
	f := Frame{
		DType:  DType(h[6]),
		Sample: int64(binary.LittleEndian.Uint64(h[8:])),
		Step:   int32(binary.LittleEndian.Uint32(h[16:])),
		Tag:    binary.LittleEndian.Uint16(h[26:]),
		Index:  int(binary.LittleEndian.Uint16(h[20:])),
		Count:  int(binary.LittleEndian.Uint16(h[22:])),
	}
	ndim := int(h[7])
	nameLen := int(binary.LittleEndian.Uint16(h[24:]))
	payloadCRC := binary.LittleEndian.Uint32(h[28:])
	payloadLen64 := binary.LittleEndian.Uint64(h[32:])
	switch {
	case ndim > MaxNDim:
		return Frame{}, badf("%d dims, max %d", ndim, MaxNDim)
	case nameLen > MaxNameLen:
		return Frame{}, badf("name of %d bytes, max %d", nameLen, MaxNameLen)
	case f.Count > MaxTensors:
		return Frame{}, badf("%d tensors, max %d", f.Count, MaxTensors)
	case f.Count == 0 && f.DType == DTypeControl && (ndim != 0 || nameLen != 0 || payloadLen64 != 0):
		return Frame{}, badf("control frame with a tensor")
	case f.Count == 0 && f.DType != DTypeControl && (f.Index != 0 || f.DType != DTypeNone || ndim != 0 || nameLen != 0 || payloadLen64 != 0):
		return Frame{}, badf("empty-message frame with a tensor")
	case f.Count > 0 && f.Index >= f.Count:
		return Frame{}, badf("tensor index %d of %d", f.Index, f.Count)
	case f.Count > 0 && f.DType.Size() == 0:
		return Frame{}, badf("unsupported dtype %d", f.DType)
	case payloadLen64 > uint64(maxFrameSize):
		return Frame{}, badf("payload of %d bytes exceeds max frame size %d", payloadLen64, maxFrameSize)
	}
	hlen := fixedHeaderLen + 8*ndim + nameLen + 4
	payloadLen := int(payloadLen64)
	if hlen+payloadLen > maxFrameSize {
		return Frame{}, badf("frame of %d bytes exceeds max %d", hlen+payloadLen, maxFrameSize)
	}
	if h, err = src.Peek(hlen); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	if got, want := crc32.Checksum(h[:hlen-4], castagnoli), binary.LittleEndian.Uint32(h[hlen-4:]); got != want {
		return Frame{}, badf("header checksum %#08x, want %#08x", got, want)
	}
	n := 1
	if ndim > 0 {
		f.Shape = make([]int, ndim)
	}
	for i := range ndim {
		d := binary.LittleEndian.Uint64(h[fixedHeaderLen+8*i:])
		if d > uint64(maxFrameSize) {
			return Frame{}, badf("dim %d is %d", i, d)
		}
		f.Shape[i] = int(d)
		if d > 0 && n > payloadLen/int(d) { // n*d would exceed the payload (and may overflow)
			return Frame{}, badf("shape %v... needs more than %d payload bytes", f.Shape[:i+1], payloadLen)
		}
		n *= int(d)
	}
	if f.Count == 0 {
		n = 0
	}
	if n*f.DType.Size() != payloadLen {
		return Frame{}, badf("shape %v needs %d bytes, payload has %d", f.Shape, n*f.DType.Size(), payloadLen)
	}
	name := h[fixedHeaderLen+8*ndim : hlen-4]
	if !utf8.Valid(name) {
		return Frame{}, badf("name %q is not UTF-8", name)
	}
	f.Name = string(name)
	if _, err := src.Discard(hlen); err != nil {
		return Frame{}, err
	}
	if r := src.remaining(); r >= 0 && r < payloadLen {
		return Frame{}, io.ErrUnexpectedEOF
	}
	if f.Count == 0 {
		return f, nil
	}
	data := make([]float32, 0, min(n, initialPayloadCap))
	crc := uint32(0)
	for left := payloadLen; left > 0; {
		k := min(left, src.chunk())
		b, err := src.Peek(k)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
		crc = crc32.Update(crc, castagnoli, b)
		old := len(data)
		data = slices.Grow(data, k/4)[:old+k/4]
		out := data[old:]
		b = b[:4*len(out)]
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i : 4*i+4]))
		}
		if _, err := src.Discard(k); err != nil {
			return Frame{}, err
		}
		left -= k
	}
	if crc != payloadCRC {
		return Frame{}, badf("payload checksum %#08x, want %#08x", crc, payloadCRC)
	}
	f.Data = data
	return f, nil
}

// sliceSource reads frames from memory.
type sliceSource struct {
	b   []byte
	off int
}

func (s *sliceSource) Peek(n int) ([]byte, error) {
	if rest := s.b[s.off:]; n > len(rest) {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		return rest, io.ErrUnexpectedEOF
	}
	return s.b[s.off : s.off+n], nil
}

func (s *sliceSource) Discard(n int) (int, error) {
	n = min(n, len(s.b)-s.off)
	s.off += n
	return n, nil
}

func (s *sliceSource) chunk() int     { return max(maxHeaderLen, (len(s.b)-s.off)&^3) }
func (s *sliceSource) remaining() int { return len(s.b) - s.off }

// DecodeFrame decodes the frame at the start of b and returns it with the number of bytes
// it used. Every failure, a truncated frame included, wraps ErrBadFrame. maxFrameSize <= 0
// means DefaultMaxFrameSize.
func DecodeFrame(b []byte, maxFrameSize int) (Frame, int, error) {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	src := &sliceSource{b: b}
	f, err := readFrame(src, maxFrameSize)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Frame{}, 0, badf("truncated frame (%d bytes)", len(b))
		}
		return Frame{}, 0, err
	}
	return f, src.off, nil
}

// Control reports whether f is a control frame of the transport rather than part of a
// message.
func (f Frame) Control() bool { return f.Count == 0 && f.DType == DTypeControl }

// appendControl appends a control frame of kind with its two values.
func appendControl(dst []byte, kind controlKind, a int64, b int32) []byte {
	return appendFrame(dst, a, b, 0, int(kind), 0, "", DTypeControl, nil, nil)
}

// Tensor returns the frame's tensor (sharing Data).
func (f Frame) Tensor() *tensor.Dense { return &tensor.Dense{Shape: f.Shape, Data: f.Data} }
