package safetensors

import "errors"

// Sentinel errors. Every error returned by this package wraps at least one of them.
var (
	// ErrInvalidHeader: the header length or the JSON header is malformed.
	ErrInvalidHeader = errors.New("safetensors: invalid header")
	// ErrTruncated: the file is shorter than its header says, or a tensor's data lies
	// beyond the end of the data buffer.
	ErrTruncated = errors.New("safetensors: truncated file")
	// ErrDtype: a dtype is unknown, or cannot be converted as asked.
	ErrDtype = errors.New("safetensors: unsupported dtype")
	// ErrShape: a shape is invalid (negative, overflowing) or does not match the byte
	// length of the tensor's data.
	ErrShape = errors.New("safetensors: invalid shape")
	// ErrOffsets: data_offsets are malformed (begin > end), or the tensors leave a hole or
	// trailing bytes in the data buffer.
	ErrOffsets = errors.New("safetensors: invalid data offsets")
	// ErrOverlap: two tensors share bytes of the data buffer.
	ErrOverlap = errors.New("safetensors: overlapping tensors")
	// ErrNotFound: no tensor of that name in the file.
	ErrNotFound = errors.New("safetensors: tensor not found")
	// ErrClosed: the File was used after Close.
	ErrClosed = errors.New("safetensors: file closed")
	// ErrInvalidTensor: the writer was given an invalid tensor (bad name, dtype or size).
	ErrInvalidTensor = errors.New("safetensors: invalid tensor to write")
)
