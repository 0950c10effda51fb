package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest JSON header accepted (the reference crate's limit).
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header key holding the free-form string map.
const metadataKey = "__metadata__"

// maxBytes bounds every tensor's byte size and element count, so that sizes fit an int64
// and an int on 64-bit platforms.
const maxBytes = math.MaxInt64 / 2

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	// Offsets are [begin, end) byte offsets relative to the start of the data buffer.
	Offsets [2]int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// ByteLen is the length of the tensor's data in bytes.
func (t TensorInfo) ByteLen() int64 { return t.Offsets[1] - t.Offsets[0] }

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors are sorted by name.
	Tensors []TensorInfo
	// Metadata is the "__metadata__" map; nil when the header has none.
	Metadata map[string]string
}

// Find returns the tensor called name (binary search over the sorted Tensors).
func (h Header) Find(name string) (TensorInfo, bool) {
	i := sort.Search(len(h.Tensors), func(i int) bool { return h.Tensors[i].Name >= name })
	if i < len(h.Tensors) && h.Tensors[i].Name == name {
		return h.Tensors[i], true
	}
	return TensorInfo{}, false
}

// ParseHeader parses and validates the JSON header of a file whose data buffer (everything
// after the header) is dataLen bytes long. It is pure: no I/O, and it never panics.
// Trailing spaces (the padding writers add) are allowed.
func ParseHeader(header []byte, dataLen int64) (Header, error) {
	if dataLen < 0 {
		return Header{}, fmt.Errorf("%w: negative data length %d", ErrInvalidHeader, dataLen)
	}
	if len(header) > MaxHeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes exceeds the %d-byte limit", ErrInvalidHeader, len(header), MaxHeaderSize)
	}
	if len(header) == 0 || header[0] != '{' {
		return Header{}, fmt.Errorf("%w: header does not begin with '{'", ErrInvalidHeader)
	}
	if !utf8.Valid(header) {
		return Header{}, fmt.Errorf("%w: header is not valid UTF-8", ErrInvalidHeader)
	}
	h, err := decodeHeader(header, dataLen)
	if err != nil {
		return Header{}, err
	}
	if err := checkLayout(h.Tensors, dataLen); err != nil {
		return Header{}, err
	}
	sort.Slice(h.Tensors, func(i, j int) bool { return h.Tensors[i].Name < h.Tensors[j].Name })
	return h, nil
}

// decodeHeader walks the top-level JSON object, rejecting duplicate names, and validates
// each entry on its own.
func decodeHeader(header []byte, dataLen int64) (Header, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the '{' checked by the caller
		return Header{}, fmt.Errorf("%w: %v", ErrInvalidHeader, err)
	}
	var h Header
	seen := map[string]bool{}
	sawMetadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Header{}, fmt.Errorf("%w: %v", ErrInvalidHeader, err)
		}
		name, ok := tok.(string)
		if !ok { // cannot happen for a valid object; kept for safety
			return Header{}, fmt.Errorf("%w: unexpected token %v", ErrInvalidHeader, tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Header{}, fmt.Errorf("%w: value of %q: %v", ErrInvalidHeader, name, err)
		}
		if name == metadataKey {
			if sawMetadata {
				return Header{}, fmt.Errorf("%w: duplicate %q", ErrInvalidHeader, metadataKey)
			}
			sawMetadata = true
			if err := json.Unmarshal(raw, &h.Metadata); err != nil {
				return Header{}, fmt.Errorf("%w: %q must map strings to strings: %v", ErrInvalidHeader, metadataKey, err)
			}
			continue
		}
		if seen[name] {
			return Header{}, fmt.Errorf("%w: tensor %q appears twice", ErrInvalidHeader, name)
		}
		seen[name] = true
		info, err := parseEntry(name, raw, dataLen)
		if err != nil {
			return Header{}, err
		}
		h.Tensors = append(h.Tensors, info)
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return Header{}, fmt.Errorf("%w: %v", ErrInvalidHeader, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v", tok)
		}
		return Header{}, fmt.Errorf("%w: data after the JSON object: %v", ErrInvalidHeader, err)
	}
	return h, nil
}

// parseEntry validates one tensor entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]}.
func parseEntry(name string, raw json.RawMessage, dataLen int64) (TensorInfo, error) {
	bad := func(sentinel error, format string, args ...any) (TensorInfo, error) {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: %s", sentinel, name, fmt.Sprintf(format, args...))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return bad(ErrInvalidHeader, "entry is not a JSON object")
	}
	rawDType, ok1 := fields["dtype"]
	rawShape, ok2 := fields["shape"]
	rawOffsets, ok3 := fields["data_offsets"]
	if !ok1 || !ok2 || !ok3 {
		return bad(ErrInvalidHeader, "entry needs dtype, shape and data_offsets")
	}
	var dt string
	if err := json.Unmarshal(rawDType, &dt); err != nil {
		return bad(ErrInvalidHeader, "dtype is not a string")
	}
	info := TensorInfo{Name: name, DType: DType(dt)}
	if !info.DType.Valid() {
		return bad(ErrDtype, "unknown dtype %q", dt)
	}
	shape, err := parseUints(rawShape)
	if err != nil {
		return bad(ErrShape, "shape: %v", err)
	}
	n := int64(1)
	info.Shape = make([]int, len(shape))
	for i, d := range shape {
		if d > maxBytes || (d != 0 && n > maxBytes/int64(d)) {
			return bad(ErrShape, "shape %v overflows", shape)
		}
		n *= int64(d)
		info.Shape[i] = int(d)
	}
	size := int64(info.DType.Size())
	if n > maxBytes/size {
		return bad(ErrShape, "shape %v of %s overflows", shape, dt)
	}
	offsets, err := parseUints(rawOffsets)
	if err != nil || len(offsets) != 2 {
		return bad(ErrOffsets, "data_offsets must be two non-negative integers, got %s", truncate(rawOffsets))
	}
	begin, end := offsets[0], offsets[1]
	if begin > end {
		return bad(ErrOffsets, "data_offsets [%d, %d]: begin after end", begin, end)
	}
	if end > dataLen {
		return bad(ErrTruncated, "data_offsets [%d, %d] end beyond the %d-byte data buffer", begin, end, dataLen)
	}
	info.Offsets = [2]int64{begin, end}
	if end-begin != n*size {
		return bad(ErrShape, "shape %v of %s needs %d bytes, data_offsets [%d, %d] hold %d", info.Shape, dt, n*size, begin, end, end-begin)
	}
	return info, nil
}

// parseUints decodes a JSON array of non-negative integer literals (no sign, fraction or
// exponent, as serde's usize), each at most maxBytes.
func parseUints(raw json.RawMessage) ([]int64, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, fmt.Errorf("not an array: %s", truncate(raw))
	}
	out := make([]int64, len(items))
	for i, it := range items {
		s := string(it)
		if s == "" || s[0] < '0' || s[0] > '9' {
			return nil, fmt.Errorf("element %d (%s) is not a non-negative integer", i, truncate(it))
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v > maxBytes {
			return nil, fmt.Errorf("element %d (%s) is not a non-negative integer below 2^62", i, truncate(it))
		}
		out[i] = v
	}
	return out, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// checkLayout verifies that the tensors tile [0, dataLen) exactly: sorted by offsets, each
// begins where the previous ended.
func checkLayout(tensors []TensorInfo, dataLen int64) error {
	order := make([]int, len(tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := tensors[order[a]], tensors[order[b]]
		if ta.Offsets[0] != tb.Offsets[0] {
			return ta.Offsets[0] < tb.Offsets[0]
		}
		if ta.Offsets[1] != tb.Offsets[1] {
			return ta.Offsets[1] < tb.Offsets[1]
		}
		return ta.Name < tb.Name
	})
	pos := int64(0)
	prev := ""
	for _, i := range order {
		t := tensors[i]
		switch {
		case t.Offsets[0] < pos:
			return fmt.Errorf("%w: tensor %q [%d, %d] overlaps tensor %q (ends at %d)", ErrOverlap, t.Name, t.Offsets[0], t.Offsets[1], prev, pos)
		case t.Offsets[0] > pos:
			return fmt.Errorf("%w: bytes [%d, %d) of the data buffer belong to no tensor (before tensor %q)", ErrOffsets, pos, t.Offsets[0], t.Name)
		}
		pos = t.Offsets[1]
		prev = t.Name
	}
	if pos != dataLen {
		return fmt.Errorf("%w: bytes [%d, %d) at the end of the data buffer belong to no tensor", ErrOffsets, pos, dataLen)
	}
	return nil
}
