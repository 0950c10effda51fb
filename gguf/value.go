package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// ValueType is the type of a metadata value, numbered as GGUF numbers it.
type ValueType uint32

// The GGUF value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size returns the bytes of a scalar of type t, 0 for string, array or unknown.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t ValueType) known() bool { return t <= TypeFloat64 }

// Value is one metadata value: a scalar, a string, or an array (of scalars, strings or
// arrays). It holds its encoded bytes and decodes on demand.
type Value struct {
	typ  ValueType
	elem ValueType // an array's element type
	n    uint64    // an array's length
	raw  []byte    // a scalar's bytes, a string's bytes, an array's encoded elements
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns an array's element type.
func (v Value) ElemType() ValueType { return v.elem }

// Len returns an array's length (0 for other values).
func (v Value) Len() int { return int(v.n) }

func (v Value) scalar(t ValueType) (uint64, bool) {
	switch t.size() {
	case 1:
		return uint64(v.raw[0]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(v.raw)), true
	case 4:
		return uint64(binary.LittleEndian.Uint32(v.raw)), true
	case 8:
		return binary.LittleEndian.Uint64(v.raw), true
	}
	return 0, false
}

// Int returns an integer value (of any integer type) as int64; ok is false for other
// types and for a uint64 above the int64 range.
func (v Value) Int() (int64, bool) {
	u, _ := v.scalar(v.typ)
	switch v.typ {
	case TypeUint8, TypeUint16, TypeUint32:
		return int64(u), true
	case TypeUint64:
		return int64(u), u <= math.MaxInt64
	case TypeInt8:
		return int64(int8(u)), true
	case TypeInt16:
		return int64(int16(u)), true
	case TypeInt32:
		return int64(int32(u)), true
	case TypeInt64:
		return int64(u), true
	}
	return 0, false
}

// Float returns a float32 or float64 value as float64.
func (v Value) Float() (float64, bool) {
	u, _ := v.scalar(v.typ)
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(u))), true
	case TypeFloat64:
		return math.Float64frombits(u), true
	}
	return 0, false
}

// Bool returns a bool value (any non-zero byte is true).
func (v Value) Bool() (bool, bool) {
	if v.typ != TypeBool {
		return false, false
	}
	return v.raw[0] != 0, true
}

// Text returns a string value.
func (v Value) Text() (string, bool) {
	if v.typ != TypeString {
		return "", false
	}
	return string(v.raw), true
}

// Elems returns an array's elements (nil for other values).
func (v Value) Elems() []Value {
	if v.typ != TypeArray {
		return nil
	}
	out := make([]Value, 0, v.n)
	b := v.raw
	for range v.n {
		e, rest, err := decodeValue(v.elem, b, 0)
		if err != nil { // cannot happen: the array was validated when the file was read
			return out
		}
		out = append(out, e)
		b = rest
	}
	return out
}

// Ints returns an array of integers (of any integer type) as int64s.
func (v Value) Ints() ([]int64, bool) {
	if v.typ != TypeArray {
		return nil, false
	}
	out := make([]int64, 0, v.n)
	for _, e := range v.Elems() {
		i, ok := e.Int()
		if !ok {
			return nil, false
		}
		out = append(out, i)
	}
	return out, true
}

// Texts returns an array of strings.
func (v Value) Texts() ([]string, bool) {
	if v.typ != TypeArray || v.elem != TypeString {
		return nil, false
	}
	out := make([]string, 0, v.n)
	for _, e := range v.Elems() {
		s, _ := e.Text()
		out = append(out, s)
	}
	return out, true
}

// String formats the value for people: numbers, quoted strings, arrays in brackets (the
// first 8 elements of a longer one).
func (v Value) String() string {
	switch v.typ {
	case TypeString:
		return fmt.Sprintf("%q", string(v.raw))
	case TypeBool:
		b, _ := v.Bool()
		return fmt.Sprint(b)
	case TypeFloat32, TypeFloat64:
		f, _ := v.Float()
		return fmt.Sprint(f)
	case TypeArray:
		es := v.Elems()
		parts := make([]string, 0, min(len(es), 8)+1)
		for i, e := range es {
			if i == 8 {
				parts = append(parts, fmt.Sprintf("... %d in all", len(es)))
				break
			}
			parts = append(parts, e.String())
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	if i, ok := v.Int(); ok {
		return fmt.Sprint(i)
	}
	u, _ := v.scalar(v.typ)
	return fmt.Sprint(u)
}

// maxDepth bounds the nesting of arrays of arrays.
const maxDepth = 8

// decodeValue reads a value of type t from b and returns it and the bytes after it. The
// value's bytes alias b.
func decodeValue(t ValueType, b []byte, depth int) (Value, []byte, error) {
	if sz := t.size(); sz > 0 {
		if len(b) < sz {
			return Value{}, nil, fmt.Errorf("%w: a %v value", ErrTruncated, t)
		}
		return Value{typ: t, raw: b[:sz:sz]}, b[sz:], nil
	}
	switch t {
	case TypeString:
		s, rest, err := readString(b)
		if err != nil {
			return Value{}, nil, err
		}
		return Value{typ: t, raw: s}, rest, nil
	case TypeArray:
		if depth >= maxDepth {
			return Value{}, nil, fmt.Errorf("%w: arrays nested more than %d deep", ErrFormat, maxDepth)
		}
		if len(b) < 12 {
			return Value{}, nil, fmt.Errorf("%w: an array header", ErrTruncated)
		}
		elem := ValueType(binary.LittleEndian.Uint32(b))
		n := binary.LittleEndian.Uint64(b[4:])
		body := b[12:]
		if !elem.known() {
			return Value{}, nil, fmt.Errorf("%w: array of unknown %v", ErrFormat, elem)
		}
		if sz := elem.size(); sz > 0 {
			if n > uint64(len(body)/sz) {
				return Value{}, nil, fmt.Errorf("%w: an array of %d %v", ErrTruncated, n, elem)
			}
			end := int(n) * sz
			return Value{typ: t, elem: elem, n: n, raw: body[:end:end]}, body[end:], nil
		}
		if n > uint64(len(body)) { // every string or array takes at least 8 bytes
			return Value{}, nil, fmt.Errorf("%w: an array of %d %v", ErrTruncated, n, elem)
		}
		rest := body
		for range n {
			var err error
			if _, rest, err = decodeValue(elem, rest, depth+1); err != nil {
				return Value{}, nil, err
			}
		}
		end := len(body) - len(rest)
		return Value{typ: t, elem: elem, n: n, raw: body[:end:end]}, rest, nil
	}
	return Value{}, nil, fmt.Errorf("%w: unknown %v", ErrFormat, t)
}

// readString reads a GGUF string (uint64 length, bytes).
func readString(b []byte) (s, rest []byte, err error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("%w: a string length", ErrTruncated)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("%w: a string of %d bytes", ErrTruncated, n)
	}
	end := 8 + int(n)
	return b[8:end:end], b[end:], nil
}

// Constructors of values for the Writer.

// String returns a string value.
func String(s string) Value { return Value{typ: TypeString, raw: []byte(s)} }

// Uint32 returns a uint32 value.
func Uint32(x uint32) Value {
	return Value{typ: TypeUint32, raw: binary.LittleEndian.AppendUint32(nil, x)}
}

// Int32 returns an int32 value.
func Int32(x int32) Value {
	return Value{typ: TypeInt32, raw: binary.LittleEndian.AppendUint32(nil, uint32(x))}
}

// Uint64 returns a uint64 value.
func Uint64(x uint64) Value {
	return Value{typ: TypeUint64, raw: binary.LittleEndian.AppendUint64(nil, x)}
}

// Float32 returns a float32 value.
func Float32(x float32) Value {
	return Value{typ: TypeFloat32, raw: binary.LittleEndian.AppendUint32(nil, math.Float32bits(x))}
}

// Bool returns a bool value.
func Bool(x bool) Value {
	b := byte(0)
	if x {
		b = 1
	}
	return Value{typ: TypeBool, raw: []byte{b}}
}

// Int32s returns an array of int32 (what ComfyUI-GGUF writes for an original shape).
func Int32s(xs ...int32) Value {
	raw := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(x))
	}
	return Value{typ: TypeArray, elem: TypeInt32, n: uint64(len(xs)), raw: raw}
}

// Strings returns an array of strings.
func Strings(xs ...string) Value {
	var raw []byte
	for _, x := range xs {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(len(x)))
		raw = append(raw, x...)
	}
	return Value{typ: TypeArray, elem: TypeString, n: uint64(len(xs)), raw: raw}
}

// encode appends the value's encoding (without its type) to b.
func (v Value) encode(b []byte) []byte {
	switch v.typ {
	case TypeString:
		b = binary.LittleEndian.AppendUint64(b, uint64(len(v.raw)))
	case TypeArray:
		b = binary.LittleEndian.AppendUint32(b, uint32(v.elem))
		b = binary.LittleEndian.AppendUint64(b, v.n)
	}
	return append(b, v.raw...)
}
