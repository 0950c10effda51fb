package gguf

import "errors"

// Sentinel errors. Every error returned by this package wraps at least one of them and
// names the file (and the key or the tensor when there is one).
var (
	// ErrFormat: not a GGUF file, an unsupported version, or a malformed header (a bad
	// value type, a duplicate key or tensor name, a bad alignment, an invalid shape).
	ErrFormat = errors.New("gguf: invalid file")
	// ErrTruncated: the file ends inside its header, or a tensor's data lies beyond its end.
	ErrTruncated = errors.New("gguf: truncated file")
	// ErrOffsets: a tensor's offset is not aligned, or two tensors share bytes.
	ErrOffsets = errors.New("gguf: invalid tensor offsets")
	// ErrType: a tensor's ggml type is not one vdpp knows (tensor/quant's table), or a row
	// is not a whole number of the type's blocks.
	ErrType = errors.New("gguf: unsupported tensor type")
	// ErrNotFound: no tensor or key of that name in the file.
	ErrNotFound = errors.New("gguf: not found")
	// ErrClosed: the File was used after Close.
	ErrClosed = errors.New("gguf: file closed")
	// ErrWrite: the writer was given an invalid key, value or tensor.
	ErrWrite = errors.New("gguf: invalid value to write")
)
