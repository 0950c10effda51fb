// Package mmapfile memory-maps files read-only for the weights readers (safetensors,
// gguf) and drops the pages of a mapped range from the process's resident memory once a
// loader has converted it. Where the platform has no mmap, Map fails and the readers read
// the file into memory instead; where madvise is not wired up, DropPages does nothing.
package mmapfile
