package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/prometheus/procfs"

	"github.com/imslab/quasipool/internal/topology"
)

// A Kamailio member of a mixed S-CSCF pool (topology Pool.Kamailio, docs/mixed-pool.md) is Kamailio's IMS
// S-CSCF run as that member's process: the lab writes its kamailio.cfg and cdp XML from the templates in
// kamailio/, starts `kamailio -DD -E` (in the foreground, logging to the node's log, its children in the node's
// process group, so kill, pause and restart act on all of them), and counts it ready when it answers OPTIONS and
// its Cx connection to the HSS is open.

//go:embed kamailio/kamailio.cfg.tmpl kamailio/scscf.xml.tmpl kamailio/CxDataType_Rel7.xsd kamailio/dbtext
var kamailioFiles embed.FS

var kamailioTemplates = template.Must(template.New("").Option("missingkey=error").
	ParseFS(kamailioFiles, "kamailio/*.tmpl"))

// KamailioEnv names the Kamailio binary the lab runs for Kamailio members (default: kamailio on PATH, then
// /usr/sbin/kamailio).
const KamailioEnv = "IMSLAB_KAMAILIO"

// KamailioAlgorithm is the registration algorithm the Kamailio S-CSCF asks the HSS for: "HSS-Selected" sends the
// scheme "unknown" and lets the HSS choose (it serves SIP Digest only, docs/hss.md).
const KamailioAlgorithm = "HSS-Selected"

// KamailioBinary returns the Kamailio binary the lab would run, or "" when there is none.
func KamailioBinary() string {
	if p := os.Getenv(KamailioEnv); p != "" {
		return p
	}
	if p, err := exec.LookPath("kamailio"); err == nil {
		return p
	}
	if isExecutable("/usr/sbin/kamailio") {
		return "/usr/sbin/kamailio"
	}
	return ""
}

// kamailioModules is where Debian's kamailio-ims-modules put the modules.
func kamailioModules() string {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu/kamailio/modules", "/usr/lib/aarch64-linux-gnu/kamailio/modules",
		"/usr/lib/kamailio/modules", "/usr/lib64/kamailio/modules"} {
		if dirExists(d) {
			return d
		}
	}
	return "/usr/lib/kamailio/modules"
}

// kamailioData is what the templates are filled with.
type kamailioData struct {
	Name, Domain, FQDN, Address string
	Port                        int
	HSSHost                     string // the HSS's peer name in cdp: its address (cdp resolves it with the system's resolver)
	HSSPort                     int
	ICSCF                       string // ip:port of the I-CSCF: every originating request goes there
	Algorithm                   string
	Expires, MaxExpires         int // seconds
	T1Ms, FrTimerMs             int
	Children, Debug             int
	ModulesDir                  string
	CtlSocket, DBDir            string
	CDPFile, XSDFile            string
	Hosts                       []kamailioHost // every SIP node of the lab
}

// kamailioHost is one SIP node's name and address, for the cfg's RESOLVE route.
type kamailioHost struct{ FQDN, HostPort string }

// KamailioFiles are the paths of a Kamailio member's generated files in a run directory.
type KamailioFiles struct {
	Config, CDP, XSD, DataDir string
}

// KamailioPaths returns where the lab writes a Kamailio member's files.
func KamailioPaths(runDir, name string) KamailioFiles {
	return KamailioFiles{
		Config:  filepath.Join(runDir, "config", name+".kamailio.cfg"),
		CDP:     filepath.Join(runDir, "config", name+".cdp.xml"),
		XSD:     filepath.Join(runDir, "config", "CxDataType_Rel7.xsd"),
		DataDir: filepath.Join(runDir, "data", name),
	}
}

// writeKamailio writes a Kamailio member's kamailio.cfg, cdp XML and the Rel-7 User-Data schema.
func (l *Lab) writeKamailio(n *node) error {
	t := l.cfg.Topology
	f := KamailioPaths(l.cfg.RunDir, n.Name)
	nc, err := t.NodeConfig(n.Name)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	hss, _ := t.Node(t.HSS.Host)
	icscf, _ := t.Node(t.ICSCF.Host)
	_, port, _ := net.SplitHostPort(n.Listen())
	p, _ := strconv.Atoi(port)
	d := kamailioData{
		Name: n.Name, Domain: t.Domain, FQDN: n.FQDN, Address: n.Address, Port: p,
		HSSHost: t.CxAddress(hss), HSSPort: t.HSS.DiameterPort,
		ICSCF:     icscf.Listen(),
		Algorithm: KamailioAlgorithm,
		Expires:   int(nc.Registration.Expires / time.Second), MaxExpires: int(nc.Registration.Expires / time.Second),
		T1Ms: int(nc.Timers.T1 / time.Millisecond), FrTimerMs: int(nc.Timers.NonInviteNoAnswer / time.Millisecond),
		Children: 2, Debug: 1,
		ModulesDir: kamailioModules(),
		CtlSocket:  filepath.Join(f.DataDir, "kamailio_ctl"), DBDir: f.DataDir,
		CDPFile: f.CDP, XSDFile: f.XSD,
	}
	for _, o := range t.Nodes() {
		switch o.Kind {
		case topology.KindBAC, topology.KindPCSCF, topology.KindICSCF, topology.KindSCSCF:
			d.Hosts = append(d.Hosts, kamailioHost{FQDN: o.FQDN, HostPort: o.Listen()})
		}
	}
	if strings.EqualFold(nc.Log.Level, "debug") {
		d.Debug = 3
	}
	if err := os.MkdirAll(f.DataDir, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	for file, tmpl := range map[string]string{f.Config: "kamailio.cfg.tmpl", f.CDP: "scscf.xml.tmpl"} {
		var b bytes.Buffer
		if err := kamailioTemplates.ExecuteTemplate(&b, tmpl, d); err != nil {
			return fmt.Errorf("lab: %s: %w", tmpl, err)
		}
		if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	// The presence module's db_text tables (ims_usrloc_scscf binds presence; presence checks its tables).
	tables, err := kamailioFiles.ReadDir("kamailio/dbtext")
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	for _, e := range tables {
		b, err := kamailioFiles.ReadFile("kamailio/dbtext/" + e.Name())
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := os.WriteFile(filepath.Join(f.DataDir, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	xsd, err := kamailioFiles.ReadFile("kamailio/CxDataType_Rel7.xsd")
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.WriteFile(f.XSD, xsd, 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// kamailioArgs is the command line of a Kamailio member: in the foreground with its children (-DD), logging to
// stderr (-E), with small memory pools (64 MiB shared, 8 MiB per process) and its runtime files in its data dir.
func kamailioArgs(runDir, name string) []string {
	f := KamailioPaths(runDir, name)
	return []string{"-f", f.Config, "-DD", "-E", "-m", "64", "-M", "8", "-Y", f.DataDir}
}

// kamailioProbe checks that a Kamailio member answers OPTIONS and that one of its processes (the node's process
// group pgid) has an established TCP connection to the HSS's Diameter port (its Cx connection is open).
func kamailioProbe(ctx context.Context, n topology.Node, hss string, pgid int) error {
	if err := sipOptions(ctx, n.Listen()); err != nil {
		return err
	}
	ok, err := groupConnected(pgid, hss)
	if err != nil {
		return fmt.Errorf("Cx connection: %w", err)
	}
	if !ok {
		return fmt.Errorf("no Cx connection to the HSS (%s) yet", hss)
	}
	return nil
}

// sipOptions sends one OPTIONS over UDP to addr and waits for any final answer to it.
func sipOptions(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return fmt.Errorf("OPTIONS probe: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	tag := hex.EncodeToString(id)
	local := c.LocalAddr().String()
	req := fmt.Sprintf("OPTIONS sip:%s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK%s;rport\r\nMax-Forwards: 70\r\n"+
		"From: <sip:lab@%s>;tag=%s\r\nTo: <sip:%s>\r\nCall-ID: labprobe-%s\r\nCSeq: 1 OPTIONS\r\n"+
		"Content-Length: 0\r\n\r\n", addr, local, tag, local, tag, addr, tag)
	if _, err := c.Write([]byte(req)); err != nil {
		return fmt.Errorf("OPTIONS probe: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		k, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("OPTIONS probe: no answer: %w", err)
		}
		msg := string(buf[:k])
		if !strings.Contains(msg, "labprobe-"+tag) || !strings.HasPrefix(msg, "SIP/2.0 ") || len(msg) < 11 {
			continue
		}
		if msg[8] == '1' {
			continue // provisional
		}
		if msg[8] != '2' {
			return fmt.Errorf("OPTIONS probe: %s", strings.SplitN(msg, "\r\n", 2)[0])
		}
		return nil
	}
}

// groupProcs returns the processes of a process group.
func groupProcs(pgid int) ([]procfs.Proc, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	all, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	var out []procfs.Proc
	for _, p := range all {
		st, err := p.Stat()
		if err == nil && st.PGRP == pgid {
			out = append(out, p)
		}
	}
	return out, nil
}

// groupConnected reports whether a process of the group pgid holds an established TCP connection to remote
// (ip:port). It reads the connection table of the group leader's network namespace (/proc/<pid>/net/tcp), so it
// works for a node in its own namespace too.
func groupConnected(pgid int, remote string) (bool, error) {
	host, port, err := net.SplitHostPort(remote)
	if err != nil {
		return false, err
	}
	rip, rport := net.ParseIP(host), 0
	if rport, err = strconv.Atoi(port); err != nil || rip == nil {
		return false, fmt.Errorf("%q: want ip:port", remote)
	}
	nsfs, err := procfs.NewFS(filepath.Join(procfs.DefaultMountPoint, strconv.Itoa(pgid)))
	if err != nil {
		return false, err
	}
	inodes := map[uint64]bool{}
	tab, err := nsfs.NetTCP()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	for _, e := range tab {
		if e.St == 1 && e.RemPort == uint64(rport) && e.RemAddr.Equal(rip) { // 1: TCP_ESTABLISHED
			inodes[e.Inode] = true
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	procs, err := groupProcs(pgid)
	if err != nil {
		return false, err
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if ino, ok := strings.CutPrefix(t, "socket:["); ok {
				if v, err := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64); err == nil && inodes[v] {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// groupUsage returns the CPU seconds of every process of a group, summed (Kamailio's main process does little:
// its children serve SIP and Diameter), and the largest resident memory of one of them (they share Kamailio's
// shared memory pool, which a sum would count once per process).
func groupUsage(pgid int) (cpuS float64, rss int, ok bool) {
	procs, err := groupProcs(pgid)
	if err != nil {
		return 0, 0, false
	}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		cpuS += st.CPUTime()
		rss = max(rss, st.ResidentMemory())
		ok = true
	}
	return cpuS, rss, ok
}
