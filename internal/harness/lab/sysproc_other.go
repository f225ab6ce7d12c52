//go:build !linux

package lab

import "syscall"

// sysProcAttr puts each node in its own process group, so that a terminal's Ctrl-C reaches only the lab.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
