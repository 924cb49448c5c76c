//go:build unix && !linux

package federation

import (
	"os"
	"syscall"
)

// procAttr puts a stdio child in its own process group, so Close can kill
// everything it started. Only Linux has Pdeathsig.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Kill()
	}
}
