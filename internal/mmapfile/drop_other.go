//go:build !linux

package mmapfile

// DropPages does nothing where the madvise advice is not wired up; the pages stay resident
// until Close unmaps them.
func DropPages(mapping, b []byte) {}
