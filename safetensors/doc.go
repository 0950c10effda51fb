// Package safetensors reads and writes the safetensors tensor file format
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of UTF-8 JSON describing every tensor, then the raw data buffer.
//
// Contract:
//   - Open memory-maps the file read-only (falling back to reading it when mapping fails)
//     and validates the whole header before returning; a File that opened is consistent:
//     every tensor's bytes lie inside the data buffer and match its dtype and shape.
//   - Validation follows the reference Rust crate: the header is at most MaxHeaderSize bytes,
//     begins with '{', is valid UTF-8 JSON with no duplicate names; every dtype is known;
//     shapes and byte sizes do not overflow; data_offsets are [begin, end] with begin <= end,
//     end-begin == product(shape) * dtype size; and the tensors cover the data buffer
//     contiguously, from 0 to its very end, with no overlap, no hole and no trailing bytes
//     (a hole or trailing bytes is ErrOffsets, an overlap ErrOverlap). Unknown fields of a
//     tensor entry are ignored, as serde does.
//   - Every error wraps one of the package's sentinel errors (match with errors.Is) and
//     names the file and, when there is one, the tensor; operating-system errors (a missing
//     file, a failed read) are wrapped as they come, so errors.Is(err, os.ErrNotExist) works.
//   - Bytes returns a zero-copy view of the mapping, valid only until Close; Float32 and
//     Tensor always return fresh memory. Methods that read tensor data return ErrClosed after
//     Close; header queries (Names, Info, Metadata) keep working.
//   - The writer produces files the reference reader accepts: header keys sorted (with
//     "__metadata__" first), data ordered by decreasing dtype size then name so that every
//     tensor is aligned to its element size, and the header padded with spaces to a multiple
//     of 8 bytes.
package safetensors
