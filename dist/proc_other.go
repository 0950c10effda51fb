//go:build !unix

package dist

import "errors"

// StartProcess is not supported on this platform.
func StartProcess(spec ProcSpec) (Process, error) {
	return nil, errors.New("dist: launching processes needs a unix system")
}
