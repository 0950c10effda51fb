package serve

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// hostMemory is the memory this process and its workers may use, in bytes: the smaller
// of the host's (MemTotal in /proc/meminfo) and the cgroup's limit (cgroup v2 memory.max
// or v1 memory.limit_in_bytes) when there is one; 0 when neither can be read.
func hostMemory() int64 {
	total := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		total = memInfoTotal(b)
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n // "max" (no limit) does not parse; a v1 "no limit" is larger than the host
		}
	}
	return total
}

// memInfoTotal reads MemTotal (in kB) out of /proc/meminfo's text, in bytes (0 when absent).
// memInfoTotal is pure.
func memInfoTotal(b []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}
