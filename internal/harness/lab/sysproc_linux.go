package lab

import "syscall"

// sysProcAttr puts each node in its own process group (so a terminal's Ctrl-C reaches only the lab, which then
// stops the nodes in order) and has the kernel kill a node if the lab dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
