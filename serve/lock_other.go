//go:build !unix

package serve

// lockDir does nothing where there is no flock: the index's own lock still keeps a second
// server off the data dir.
func lockDir(string) (func(), error) { return func() {}, nil }
