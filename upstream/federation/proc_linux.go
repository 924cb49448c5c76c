package federation

import (
	"os"
	"syscall"
)

// procAttr puts a stdio child in its own process group, so Close can kill
// everything it started, and has the kernel kill it if the gateway dies
// first (Pdeathsig; it fires when the thread that started the child ends,
// which in Go is the process unless that thread was locked and exited).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) {
	// The group's id is the child's pid (Setpgid with Pgid 0).
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Kill()
	}
}
