//go:build !unix

package conformance

import (
	"os/exec"
	"syscall"
)

func setGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}
