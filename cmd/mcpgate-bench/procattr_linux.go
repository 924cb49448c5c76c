package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the child when the bench dies, so an interrupted run
// leaves no server behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
