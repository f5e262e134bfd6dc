//go:build unix

package conformance

import (
	"os/exec"
	"syscall"
)

// setGroup starts the command in a process group of its own, so that a
// signal reaches a wrapper's children too (a shell script, npx).
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup signals the command's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}
