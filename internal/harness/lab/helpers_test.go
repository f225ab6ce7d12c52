package lab_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/topology"
)

// freeBlock returns the first of n consecutive free ports (testutil.FreeBlock).
func freeBlock(n int) int {
	GinkgoHelper()
	base, err := testutil.FreeBlock(n)
	Expect(err).NotTo(HaveOccurred())
	return base
}

// testTopology is the default lab shape (pools of 2) on a free block of ports.
func testTopology() *topology.Topology {
	GinkgoHelper()
	b := freeBlock(10)
	t, err := topology.Parse([]byte(fmt.Sprintf(`
domain: ims.test
dns: {listen: 127.0.0.1:%d}
hss: {address: 127.0.0.1, diameter_port: %d, http_port: %d}
bac: {address: 127.0.0.1, port: %d}
icscf: {address: 127.0.0.1, port: %d}
pools:
  pcscf: {size: 2, address: 127.0.0.1, base_port: %d}
  scscf: {size: 2, address: 127.0.0.1, base_port: %d}
`, b, b+1, b+2, b+3, b+4, b+5, b+7)))
	Expect(err).NotTo(HaveOccurred())
	return t
}

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(GinkgoWriter, nil)) }

type event map[string]any

// labEvents reads <run-dir>/events/lab.jsonl.
func labEvents(l *lab.Lab) []event {
	b, err := os.ReadFile(l.EventsFile("lab"))
	Expect(err).NotTo(HaveOccurred())
	var out []event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e event
		Expect(json.Unmarshal([]byte(line), &e)).To(Succeed())
		out = append(out, e)
	}
	return out
}

// eventsOf returns the lab events of one kind about one target.
func eventsOf(l *lab.Lab, kind, target string) []event {
	var out []event
	for _, e := range labEvents(l) {
		if e["kind"] == kind && (target == "" || e["target"] == target) {
			out = append(out, e)
		}
	}
	return out
}

// groupGone reports whether no live process is left in the process group pgid (each node leads its own group).
// Zombies do not count: in a container, PID 1 may be slow to reap orphans.
func groupGone(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state, ppid, pgrp, ...
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return false
		}
	}
	return true
}

func status(l *lab.Lab, name string) lab.NodeStatus {
	for _, s := range l.Status() {
		if s.Name == name {
			return s
		}
	}
	Fail("no node " + name)
	return lab.NodeStatus{}
}

// procState returns the state letter of a process from /proc (R, S, T for stopped, …).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}
