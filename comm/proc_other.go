//go:build !unix

package comm

import "errors"

// StartProcess is not supported on this platform.
func StartProcess(spec ProcSpec) (Process, error) {
	return nil, errors.New("comm: launching processes needs a unix system")
}
