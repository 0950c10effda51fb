//go:build unix

package comm

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// execProcess is a child started by StartProcess, leader of its own process group.
type execProcess struct{ cmd *exec.Cmd }

// StartProcess starts spec as a child in its own process group (so signals reach its
// children too and a terminal's Ctrl-C reaches only the launcher, which forwards it), or
// its own session (spec.OwnSession, which makes it a process group leader too) and, on
// Linux, with the parent-death signal SIGKILL so it cannot outlive the launcher.
func StartProcess(spec ProcSpec) (Process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout = spec.Stdout
	cmd.Stderr = spec.Stderr
	cmd.SysProcAttr = sysProcAttr()
	if spec.OwnSession {
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
	}
	// A grandchild holding the output pipes must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("comm: start rank %d (%s): %w", spec.Rank, spec.Path, err)
	}
	return &execProcess{cmd: cmd}, nil
}

func (p *execProcess) Pid() int { return p.cmd.Process.Pid }

// Wait waits for the child, then kills what is left of its process group.
func (p *execProcess) Wait() error {
	err := p.cmd.Wait()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	return err
}

// Signal sends sig to the child's process group.
func (p *execProcess) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.cmd.Process.Signal(sig)
	}
	return syscall.Kill(-p.cmd.Process.Pid, s)
}
