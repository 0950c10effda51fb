//go:build !unix

package train

// cpuSeconds is the CPU time this process has used: not measured on this platform.
func cpuSeconds() float64 { return 0 }
