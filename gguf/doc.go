// Package gguf reads and writes GGUF files (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
// the format of ggml, stable-diffusion.cpp and ComfyUI-GGUF: the magic "GGUF", a version
// (3; 2 is read too), the tensor and metadata counts, the metadata (typed key-value pairs),
// the tensor table (name, dimensions as ggml's ne, ggml type, offset), padding to the
// alignment (general.alignment, 32 by default), then the tensors' data.
//
// Contract:
//   - Open memory-maps the file read-only (reading it where the platform cannot map) and
//     validates the whole header before it returns: every count, length and dimension is
//     bounded by the file (a hostile header cannot make the reader allocate beyond its
//     size); metadata keys and tensor names are unique; value types are known and arrays
//     nest at most 8 deep; general.alignment, when present, is a uint32 power of two; a
//     tensor has at most MaxDims dimensions, its rows (ne[0]) are whole blocks of its type,
//     its offset is aligned, its bytes lie inside the data section and share none with
//     another tensor. A tensor of a ggml type tensor/quant does not know (the IQ types, for
//     instance) is listed with Size -1; reading it is ErrType, so the caller names it.
//   - Every error wraps one of the package's sentinels and names the file, and the key or
//     tensor when there is one. Parsing is fuzzed (FuzzOpen).
//   - Bytes returns a zero-copy view of the mapping, valid until Close; Float32 returns
//     fresh memory, dequantized bit for bit as ggml does (tensor/quant). Release drops a
//     converted tensor's pages from the process's resident memory. Metadata and the tensor
//     table stay readable after Close.
//   - Shapes: Dims are as stored (ggml's order, fastest first); TensorInfo.Shape is their
//     reverse, PyTorch's order, as both ComfyUI-GGUF and stable-diffusion.cpp write them;
//     File.Shape applies ComfyUI-GGUF's comfy.gguf.orig_shape.<name> when the converter
//     stored a tensor reshaped.
//   - Writer writes version 3 files that ggml's reader accepts: metadata in the order set,
//     tensors in the order added, each one's data padded to the alignment.
package gguf
