package safetensors

// DType is a safetensors element type, spelled as in the file ("F32", "BF16", ...).
type DType string

// The element types this package knows. Only the floating point ones (F64, F32, F16,
// BF16) convert to float32; the others can be read with Bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	BOOL   DType = "BOOL"
)

var dtypeSizes = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2, F8E4M3: 1, F8E5M2: 1,
	I64: 8, I32: 4, I16: 2, I8: 1,
	U64: 8, U32: 4, U16: 2, U8: 1,
	BOOL: 1,
}

// Size returns the size in bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// Valid reports whether d is a dtype this package knows.
func (d DType) Valid() bool { return dtypeSizes[d] != 0 }

// IsFloat reports whether Float32 can convert tensors of this dtype.
func (d DType) IsFloat() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }
