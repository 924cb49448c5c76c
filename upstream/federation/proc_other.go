//go:build !unix

package federation

import (
	"os"
	"syscall"
)

// procAttr: no process groups here; Close kills the child alone.
func procAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) { _ = p.Kill() }
