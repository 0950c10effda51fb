//go:build !linux

package safetensors

// dropPages does nothing where the madvise advice is not wired up; the pages stay resident
// until Close unmaps them.
func dropPages(mapping, b []byte) {}
