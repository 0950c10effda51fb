// Package buildinfo says which vdpp this is: the release version and, from the Go build's
// own record (runtime/debug.ReadBuildInfo's vcs settings), the commit it was built from
// and whether the tree had changes. `vdpp version` prints it and every report.json carries
// it.
//
// Contract: Read never fails; what the build did not record is empty (a binary built
// outside a git checkout has no commit).
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Version is vdpp's release version.
const Version = "0.1.0-dev"

// Info is a build's identity.
type Info struct {
	Version string `json:"version"`
	// Commit is the git revision the binary was built from; Modified says the tree had
	// uncommitted changes; Time is the commit's time (RFC 3339).
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Go       string `json:"go,omitempty"`
}

// Read returns this binary's Info.
func Read() Info {
	info := Info{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.Go = bi.GoVersion
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			info.Commit = kv.Value
		case "vcs.modified":
			info.Modified = kv.Value == "true"
		case "vcs.time":
			info.Time = kv.Value
		}
	}
	return info
}

// String is "vdpp VERSION (commit C[, modified], GOVERSION)", the commit cut to 12 hex
// digits.
func (i Info) String() string {
	s := "vdpp " + i.Version
	rev := i.Commit
	if len(rev) > 12 {
		rev = rev[:12]
	}
	dirty := ""
	if i.Modified {
		dirty = ", modified"
	}
	switch {
	case rev != "":
		return fmt.Sprintf("%s (commit %s%s, %s)", s, rev, dirty, i.Go)
	case i.Go != "":
		return fmt.Sprintf("%s (%s)", s, i.Go)
	}
	return s
}
