package lab

// LimitCPU and RemoveCPULimit expose the cgroup mechanics of Throttle to the tests.
func LimitCPU(pid int, name string, percent int) (dir string, quotaUs, periodUs int, remove func() error, err error) {
	c, err := limitCPU(pid, name, percent)
	if c == nil {
		return "", 0, 0, nil, err
	}
	return c.dir, c.quotaUs, c.periodUs, c.remove, err
}

// CPUCgroupOf exposes cpuCgroupOf.
func CPUCgroupOf(pid int) (string, error) { return cpuCgroupOf(pid) }

// SIPOptions exposes the OPTIONS probe of a Kamailio member.
var SIPOptions = sipOptions
