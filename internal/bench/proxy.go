package bench

// imslab bench: the lab's SIP cost per call per proxy hop, side by side with Kamailio in one run
// (docs/performance.md).
//
// One step is SIPp caller → ONE proxy → SIPp callee at a fixed call rate for a fixed time, the proxy being either
// Kamailio (bench/kamailio.cfg: stateful, record-routing) or the lab's proxy run alone ("imslab bench relay": one
// sipx.Proxy, the framework every node of the lab stands on, record-routing and relaying to a static next hop
// with the lab's default memory limit). The proxy's CPU (utime+stime of its whole process tree, /proc) over the
// SIPp run divided by the calls completed is the CPU per call per proxy hop. Steps alternate between the two
// proxies at the same rate, and the ratio lab/Kamailio is computed per pair and as a median.

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// Proxy kinds of a bench step.
const (
	benchKamailio = "kamailio"
	benchLab      = "lab"      // the lab's proxy as a node runs it: events and message trace recorded
	benchLabBare  = "lab-bare" // the same proxy without events and trace
)

// benchResult is one step: one proxy at one rate for one duration.
type benchResult struct {
	Step     int     `json:"step"`
	Proxy    string  `json:"proxy"`
	Rate     float64 `json:"rate"`
	Duration string  `json:"duration"`
	Calls    int     `json:"calls"`  // calls completed successfully (SIPp's SuccessfulCall)
	Failed   int     `json:"failed"` // SIPp's FailedCall
	// Unexpected are messages SIPp did not expect at that point of the call and let pass (Warnings): a 180 that
	// a multi-process proxy relays after the 200 of the same call. A real error still fails the call.
	Unexpected int     `json:"unexpected_messages"`
	CPUSec     float64 `json:"cpu_s"`  // proxy CPU (user+system) over the SIPp run
	WallSec    float64 `json:"wall_s"` // length of the SIPp run
	CPUMsCall  float64 `json:"cpu_ms_per_call"`
	CPUShare   float64 `json:"cpu_share"` // CPU seconds per wall second (1 = one core)
	// IdleCPUShare is the proxy's CPU share over 2 s without calls just before the step; that idle cost (timers)
	// goes on during the step and is not subtracted from CPUSec.
	IdleCPUShare float64 `json:"idle_cpu_share"`
	// Ratio is this lab step's CPU per call over the nearest Kamailio step's at the same rate (0 for Kamailio).
	Ratio      float64 `json:"ratio,omitempty"`
	SetupP50Ms float64 `json:"setup_p50_ms"`
	SetupP95Ms float64 `json:"setup_p95_ms"`
	SetupN     int     `json:"setup_samples"`
	Procs      int     `json:"proxy_processes"`
	// ObsBytes is the size of the events and message trace the lab proxy wrote in the step (removed afterwards).
	ObsBytes int64  `json:"events_trace_bytes,omitempty"`
	LoadAvg  string `json:"loadavg_after"`
	// Error is why the step could not run or finish (the other steps still run).
	Error string `json:"error,omitempty"`
}

type benchMachine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Commit    string `json:"commit"`
	Dirty     bool   `json:"dirty"`
	Kamailio  string `json:"kamailio"`
	SIPp      string `json:"sipp"`
	LoadStart string `json:"loadavg_start"`
}

type benchReport struct {
	Date    string        `json:"date"`
	Command string        `json:"command"`
	Machine benchMachine  `json:"machine"`
	Steps   []benchResult `json:"steps"`
	// MedianRatio is the median of the per-pair ratios lab/Kamailio of CPU per call (all rates).
	MedianRatio float64 `json:"median_ratio"`
	// MedianRatios are the medians of the pair ratios of each of the lab's proxies (lab, lab-bare).
	MedianRatios map[string]float64 `json:"median_ratios"`
	// Median CPU per call of each proxy over its steps (all rates).
	MedianCPUMsCall map[string]float64 `json:"median_cpu_ms_per_call"`
	// ByRate are the same medians per call rate.
	ByRate []benchRateSummary `json:"by_rate"`

	// The all-in-one bench (bench.go): the kinds run, the provenance of the run, why the proxy steps did not
	// run (no SIPp or Kamailio), the lab kinds' steps and the summary against the targets.
	Kinds        []string           `json:"kinds"`
	Provenance   provenance.Info    `json:"provenance"`
	ProxyError   string             `json:"proxy_error,omitempty"`
	Capacity     []capacityStep     `json:"capacity,omitempty"`
	Registration []registrationStep `json:"registration,omitempty"`
	Memory       []memoryStep       `json:"memory,omitempty"`
	Summary      []targetRow        `json:"summary"`
}

type benchRateSummary struct {
	Rate            float64              `json:"rate"`
	Pairs           int                  `json:"pairs"` // lab steps paired with a Kamailio step
	MedianRatio     float64              `json:"median_ratio"`
	MedianRatios    map[string]float64   `json:"median_ratios"`
	Ratios          map[string][]float64 `json:"ratios"`
	MedianCPUMsCall map[string]float64   `json:"median_cpu_ms_per_call"`
}

// StepsFailedError is Run's error when some steps failed or could not run (bench.md's error column says why).
type StepsFailedError struct{ N int }

func (e *StepsFailedError) Error() string {
	return fmt.Sprintf("%d step(s) failed or could not run: see the error column of bench.md", e.N)
}

// Run runs the bench c asks for and writes bench.md and bench.json into c.OutDir, with a progress line per step
// on out and the reason of every step that failed on errOut (prefixed "imslab bench:"). A step that fails or
// cannot run is a row with its reason and the others still run; then Run returns a *StepsFailedError (also
// when ctx ended the run).
func Run(ctx context.Context, c Config, out, errOut io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	root := c.Repo
	dir := c.OutDir
	if dir == "" {
		dir = filepath.Join(root, "runs", "bench-"+time.Now().Format("20060102-150405"))
	}
	dir, err := filepath.Abs(dir) // the proxies and SIPp run in the step directories
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}

	rep := benchReport{Date: time.Now().UTC().Format(time.RFC3339), Command: c.Command,
		Kinds: c.Kinds, Provenance: provenanceOf(root, c.Argv)}
	fmt.Fprintf(out, "bench: kinds %s; output %s\n", strings.Join(c.Kinds, ","), dir)
	if c.has(kindProxy) {
		if err := benchTools(c.Install, out); err != nil {
			rep.ProxyError = err.Error()
			fmt.Fprintln(errOut, "imslab bench: proxy steps skipped:", err)
		} else {
			fmt.Fprintf(out, "bench: %d proxy steps at %s calls/s for %s each\n", len(c.Steps)*len(c.Rates),
				joinFloats(c.Rates), c.Duration)
			for _, rate := range c.Rates {
				for _, k := range c.Steps {
					i := len(rep.Steps) + 1
					r, err := benchStep(ctx, root, filepath.Join(dir, fmt.Sprintf("step%02d-%s-%g", i, k, rate)), k, rate, c.Duration,
						benchProxyPorts(c.PortBase))
					r.Step = i
					if err != nil {
						r.Error, r.LoadAvg = err.Error(), loadAvg()
						fmt.Fprintf(errOut, "imslab bench: step %d (%s at %g/s): %v\n", i, k, rate, err)
					}
					rep.Steps = append(rep.Steps, r)
					fmt.Fprintf(out, "step %d %-8s %g/s calls %d failed %d cpu %.3f ms/call setup p50 %.0f ms p95 %.0f ms (load %s)\n",
						r.Step, r.Proxy, rate, r.Calls, r.Failed, r.CPUMsCall, r.SetupP50Ms, r.SetupP95Ms, r.LoadAvg)
				}
			}
		}
	}
	rep.Machine = benchMachineInfo(root) // after a possible install of Kamailio
	benchRatios(&rep)
	runLabKinds(ctx, &c, root, dir, &rep, out, errOut)
	rep.Summary = benchTargets(&rep)
	if err := writeBench(dir, &rep); err != nil {
		return err
	}
	for _, r := range rep.Summary {
		if r.Measured == "" {
			fmt.Fprintf(out, "target %s %s: not measured\n", r.Measure, r.Target)
			continue
		}
		fmt.Fprintf(out, "target %s %s: measured %s (n: %s), met: %s\n", r.Measure, r.Target, r.Measured, r.N, r.Met)
	}
	fmt.Fprintf(out, "bench.md, bench.json in %s\n", dir)
	if n := benchFailures(&rep); n > 0 || ctx.Err() != nil {
		return &StepsFailedError{N: n}
	}
	return nil
}

// benchProxyPorts are the proxy steps' ports (proxy, SIPp callee, SIPp caller): port-base+100…+102, or free
// ports when portBase is 0.
func benchProxyPorts(portBase int) []int {
	if portBase == 0 {
		return nil
	}
	return []int{portBase + 100, portBase + 101, portBase + 102}
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// benchRatios pairs every lab step with the nearest Kamailio step at the same rate (the one before it on a tie)
// and computes the ratios and medians. The headline MedianRatio is over the "lab" steps.
func benchRatios(rep *benchReport) {
	nearest := func(i int) *benchResult {
		for d := 1; d < len(rep.Steps); d++ {
			for _, j := range []int{i - d, i + d} {
				if j >= 0 && j < len(rep.Steps) && rep.Steps[j].Proxy == benchKamailio && rep.Steps[j].Rate == rep.Steps[i].Rate &&
					rep.Steps[j].Error == "" {
					return &rep.Steps[j]
				}
			}
		}
		return nil
	}
	type rateAcc struct {
		ratios map[string][]float64
		per    map[string][]float64
	}
	byRate := map[float64]*rateAcc{}
	var order []float64
	ratios := map[string][]float64{}
	per := map[string][]float64{}
	for i := range rep.Steps {
		s := &rep.Steps[i]
		acc := byRate[s.Rate]
		if acc == nil {
			acc = &rateAcc{ratios: map[string][]float64{}, per: map[string][]float64{}}
			byRate[s.Rate] = acc
			order = append(order, s.Rate)
		}
		if s.Calls > 0 && s.Error == "" { // a step that failed part-way has no CPU per call to compare
			per[s.Proxy] = append(per[s.Proxy], s.CPUMsCall)
			acc.per[s.Proxy] = append(acc.per[s.Proxy], s.CPUMsCall)
		}
		if s.Proxy == benchKamailio || s.Calls == 0 || s.Error != "" {
			continue
		}
		if k := nearest(i); k != nil && k.CPUMsCall > 0 {
			s.Ratio = s.CPUMsCall / k.CPUMsCall
			ratios[s.Proxy] = append(ratios[s.Proxy], s.Ratio)
			acc.ratios[s.Proxy] = append(acc.ratios[s.Proxy], s.Ratio)
		}
	}
	medians := func(m map[string][]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out[k] = median(v)
		}
		return out
	}
	rep.MedianRatio = median(ratios[benchLab])
	rep.MedianRatios = medians(ratios)
	rep.MedianCPUMsCall = medians(per)
	for _, r := range order {
		acc := byRate[r]
		rep.ByRate = append(rep.ByRate, benchRateSummary{Rate: r, Pairs: len(acc.ratios[benchLab]),
			MedianRatio: median(acc.ratios[benchLab]), MedianRatios: medians(acc.ratios), Ratios: acc.ratios,
			MedianCPUMsCall: medians(acc.per)})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchTools checks for sipp and kamailio; a missing kamailio is installed from the Debian package when allowed.
func benchTools(install bool, out io.Writer) error {
	if _, err := exec.LookPath("sipp"); err != nil {
		return errors.New("sipp not found: install SIPp (Debian: apt-get install -y sip-tester)")
	}
	if _, err := exec.LookPath("kamailio"); err == nil {
		return nil
	}
	if !install || os.Geteuid() != 0 {
		return errors.New("kamailio not found: install it (Debian: apt-get install -y kamailio; no module package is needed)")
	}
	fmt.Fprintln(out, "bench: kamailio not found, running apt-get install -y kamailio")
	cmd := exec.Command("apt-get", "install", "-y", "kamailio")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get install -y kamailio: %w", err)
	}
	if _, err := exec.LookPath("kamailio"); err != nil {
		return errors.New("kamailio still not found after apt-get install")
	}
	return nil
}

// benchStep runs one proxy, a SIPp callee behind it and a SIPp caller in front of it, and measures.
func benchStep(ctx context.Context, root, dir, kind string, rate float64, d time.Duration, ports []int) (benchResult, error) {
	res := benchResult{Proxy: kind, Rate: rate, Duration: d.String()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	if len(ports) < 3 {
		var err error
		if ports, err = freeUDPPorts(3); err != nil {
			return res, err
		}
	}
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	uasAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	uacPort := ports[2]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	uas := exec.CommandContext(ctx, "sipp", "-sf", filepath.Join(root, "sipp", "bench-uas.xml"), "-i", "127.0.0.1",
		"-p", strconv.Itoa(ports[1]), "-nostdin", "-max_socket", "1024")
	uas.Dir = dir
	uas.Stdout, uas.Stderr = io.Discard, io.Discard
	if err := uas.Start(); err != nil {
		return res, fmt.Errorf("sipp callee: %w", err)
	}
	defer stopProcess(uas)

	var proxy *exec.Cmd
	logf, err := os.Create(filepath.Join(dir, "proxy.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	switch kind {
	case benchKamailio:
		proxy = exec.CommandContext(ctx, "kamailio", "-f", filepath.Join(root, "bench", "kamailio.cfg"), "-DD", "-E",
			"-l", "udp:"+proxyAddr, "-A", `NEXT_HOP="sip:`+uasAddr+`"`, "-P", filepath.Join(dir, "kamailio.pid"),
			"-m", "128", "-M", "16")
	default:
		self, err := os.Executable()
		if err != nil {
			return res, err
		}
		args := []string{"bench", "relay", "--listen", proxyAddr, "--next", uasAddr,
			"--trust", fmt.Sprintf("127.0.0.1:%d,%s", uacPort, uasAddr)}
		if kind == benchLab {
			args = append(args, "--events", filepath.Join(dir, "events.jsonl"), "--trace", filepath.Join(dir, "trace.pcapng"))
		}
		proxy = exec.CommandContext(ctx, self, args...)
	}
	proxy.Dir = dir
	proxy.Stdout, proxy.Stderr = logf, logf
	proxy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := proxy.Start(); err != nil {
		return res, fmt.Errorf("%s: %w", kind, err)
	}
	defer stopProcess(proxy)
	if err := waitSIPReady(ctx, proxyAddr, 15*time.Second); err != nil {
		return res, fmt.Errorf("%s did not answer OPTIONS on %s: %w (log %s)", kind, proxyAddr, err, logf.Name())
	}
	time.Sleep(time.Second) // let the proxy's start-up work settle before the CPU is sampled
	idle0, _, err := treeCPU(proxy.Process.Pid)
	if err != nil {
		return res, err
	}
	time.Sleep(2 * time.Second) // the idle cost (timers), reported beside the measure, not subtracted

	calls := int(math.Round(rate * d.Seconds()))
	uac := exec.CommandContext(ctx, "sipp", proxyAddr, "-sf", filepath.Join(root, "sipp", "bench-uac.xml"), "-s", "callee",
		"-i", "127.0.0.1", "-p", strconv.Itoa(uacPort), "-r", strconv.FormatFloat(rate, 'f', -1, 64), "-m", strconv.Itoa(calls),
		"-trace_stat", "-stf", "stat.csv", "-fd", "1", "-trace_rtt", "-rtt_freq", "1", "-trace_err", "-nostdin",
		"-default_behaviors", "all,-abortunexp",
		"-timeout", strconv.Itoa(int(d.Seconds())+60)+"s", "-max_socket", "1024")
	uac.Dir = dir
	uac.Stdout, uac.Stderr = io.Discard, io.Discard
	cpu0, n0, err := treeCPU(proxy.Process.Pid)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	err = uac.Run()
	wall := time.Since(t0)
	cpu1, n1, cerr := treeCPU(proxy.Process.Pid)
	if cerr != nil {
		return res, fmt.Errorf("%s exited during the step: %w (log %s)", kind, cerr, logf.Name())
	}
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: some calls failed; counted below
		return res, fmt.Errorf("sipp caller: %w", err)
	}
	res.Calls, res.Failed, res.Unexpected, err = sippCounts(filepath.Join(dir, "stat.csv"))
	if err != nil {
		return res, err
	}
	setups, err := sippSetups(dir)
	if err != nil {
		return res, err
	}
	res.SetupN = len(setups)
	res.SetupP50Ms, res.SetupP95Ms = percentile(setups, 0.5), percentile(setups, 0.95)
	res.CPUSec = cpu1 - cpu0
	res.IdleCPUShare = (cpu0 - idle0) / 2
	res.WallSec = wall.Seconds()
	res.CPUShare = res.CPUSec / res.WallSec
	res.Procs = max(n0, n1)
	if res.Calls > 0 {
		res.CPUMsCall = res.CPUSec * 1000 / float64(res.Calls)
	}
	res.LoadAvg = loadAvg()
	if kind == benchLab {
		stopProcess(proxy) // flush and close the trace before it is measured
		files, _ := filepath.Glob(filepath.Join(dir, "trace*.pcapng"))
		for _, f := range append(files, filepath.Join(dir, "events.jsonl")) {
			if st, err := os.Stat(f); err == nil {
				res.ObsBytes += st.Size()
			}
			_ = os.Remove(f)
		}
	}
	return res, nil
}

func stopProcess(c *exec.Cmd) {
	if c.Process == nil || c.ProcessState != nil {
		return
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

func freeUDPPorts(n int) ([]int, error) {
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var ports []int
	for range n {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	return ports, nil
}

// waitSIPReady sends OPTIONS until the proxy answers anything.
func waitSIPReady(ctx context.Context, addr string, timeout time.Duration) error {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer c.Close()
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	local := c.LocalAddr().String()
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for i := 0; time.Now().Before(deadline); i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := fmt.Sprintf("OPTIONS sip:%s SIP/2.0\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bKbench%d\r\nMax-Forwards: 70\r\n"+
			"From: <sip:bench@%s>;tag=b%d\r\nTo: <sip:%s>\r\nCall-ID: bench-ready-%d@%s\r\nCSeq: 1 OPTIONS\r\n"+
			"Content-Length: 0\r\n\r\n", addr, local, i, local, i, addr, i, local)
		if _, err := c.WriteTo([]byte(msg), dst); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, _, err := c.ReadFrom(buf); err == nil && strings.HasPrefix(string(buf[:n]), "SIP/2.0 ") {
			return nil
		}
	}
	return errors.New("no answer")
}

// treeCPU sums utime+stime (seconds) of a process and all its descendants (Kamailio forks its workers).
func treeCPU(pid int) (float64, int, error) {
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	ticks := map[int]float64{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, t, err := procStat(p)
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
		ticks[p] = t
	}
	if _, ok := ticks[pid]; !ok {
		return 0, 0, fmt.Errorf("process %d is gone", pid)
	}
	total, n := 0.0, 0
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		total += ticks[p]
		n++
		stack = append(stack, children[p]...)
	}
	return total / clockTicks, n, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on every Linux architecture Go supports).
const clockTicks = 100.0

// procStat reads ppid and utime+stime (ticks) from /proc/<pid>/stat.
func procStat(pid int) (int, float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseFloat(f[11], 64) // field 14
	st, err3 := strconv.ParseFloat(f[12], 64) // field 15
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ppid, ut + st, nil
}

// sippCounts reads the cumulative successful and failed calls from the last line of SIPp's -trace_stat file.
func sippCounts(path string) (ok, failed, warnings int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sipp statistics: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma = ';'
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sipp statistics %s: %w", path, err)
	}
	if len(rows) < 2 {
		return 0, 0, 0, fmt.Errorf("sipp statistics %s: no data line", path)
	}
	head, last := rows[0], rows[len(rows)-1]
	col := func(name string) (int, error) {
		for i, h := range head {
			if h == name && i < len(last) {
				return strconv.Atoi(strings.TrimSpace(last[i]))
			}
		}
		return 0, fmt.Errorf("sipp statistics %s: no column %s", path, name)
	}
	ok, err1 := col("SuccessfulCall(C)")
	failed, err2 := col("FailedCall(C)")
	warnings, err3 := col("Warnings(C)")
	return ok, failed, warnings, errors.Join(err1, err2, err3)
}

// sippSetups reads the per-call setup times (ms) SIPp dumped with -trace_rtt (<scenario>_<pid>_rtt.csv).
func sippSetups(dir string) ([]float64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "bench-uac_*_rtt.csv"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no SIPp response-time file in %s", dir)
	}
	var v []float64
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ";")
			if len(fields) < 3 || fields[2] != "setup" {
				continue
			}
			if x, err := strconv.ParseFloat(fields[1], 64); err == nil {
				v = append(v, x)
			}
		}
		f.Close()
	}
	return v, nil
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// RepoRoot is the repository root the bench runs from: flagRepo when given (it must hold bench/kamailio.cfg),
// else the first directory at or above the working directory that holds bench/kamailio.cfg.
func RepoRoot(flagRepo string) (string, error) {
	if flagRepo != "" {
		if _, err := os.Stat(filepath.Join(flagRepo, "bench", "kamailio.cfg")); err != nil {
			return "", fmt.Errorf("--repo %s: no bench/kamailio.cfg", flagRepo)
		}
		return flagRepo, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "bench", "kamailio.cfg")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("bench/kamailio.cfg not found above the working directory (run from the repository or pass --repo)")
		}
		dir = parent
	}
}

func benchMachineInfo(root string) benchMachine {
	m := benchMachine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			m.Dirty = len(strings.TrimSpace(string(st))) > 0
		}
	} else if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Commit = s.Value
			case "vcs.modified":
				m.Dirty = s.Value == "true"
			}
		}
	}
	m.Kamailio = firstLine(exec.Command("kamailio", "-v"))
	m.SIPp = firstLine(exec.Command("sipp", "-v"))
	return m
}

func firstLine(c *exec.Cmd) string {
	b, _ := c.CombinedOutput()
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func writeBench(dir string, rep *benchReport) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.md"), []byte(benchMarkdown(rep)), 0o644)
}

// benchMarkdown renders a report as the table of docs/performance.md.
func benchMarkdown(rep *benchReport) string {
	var b strings.Builder
	m := rep.Machine
	pv := rep.Provenance
	fmt.Fprintf(&b, "# imslab bench, %s\n\n", rep.Date)
	fmt.Fprintf(&b, "`%s`\n\n", rep.Command)
	fmt.Fprintf(&b, "Provenance: commit %s, %s (%s), %s, %d CPUs, kernel %s, %s; %s; %s; load average at start %s.\n\n",
		pv.Short(), pv.GoVersion, pv.GoBuild, pv.CPUModel, pv.CPUs, pv.Kernel, pv.OS, m.Kamailio, m.SIPp, m.LoadStart)
	fmt.Fprintf(&b, "Kinds: %s.\n", strings.Join(rep.Kinds, ", "))
	if slices.Contains(rep.Kinds, kindProxy) {
		b.WriteString("\n## Proxy: CPU per call per proxy hop, the lab's proxy beside Kamailio\n\n")
		if rep.ProxyError != "" {
			fmt.Fprintf(&b, "Not run: %s\n", rep.ProxyError)
		}
	}
	if len(rep.Steps) > 0 {
		b.WriteString("| step | proxy | rate (calls/s) | n (calls) | failed | unexpected msgs | CPU ms/call | CPU share | ratio lab/kamailio | setup p50 (ms) | setup p95 (ms) | idle CPU share | load after | provenance | error |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rep.Steps {
			ratio := ""
			if s.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", s.Ratio)
			}
			if s.Error != "" {
				fmt.Fprintf(&b, "| %d | %s | %g |  |  |  |  |  |  |  |  |  | %s | %s, %d CPUs | %s |\n", s.Step, s.Proxy, s.Rate,
					s.LoadAvg, pv.Short(), pv.CPUs, strings.ReplaceAll(s.Error, "|", "/"))
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %g | %d | %d | %d | %.3f | %.0f %% | %s | %.0f | %.0f | %.1f %% | %s | %s, %d CPUs | %s |\n", s.Step,
				s.Proxy, s.Rate, s.Calls, s.Failed, s.Unexpected, s.CPUMsCall, s.CPUShare*100, ratio, s.SetupP50Ms, s.SetupP95Ms,
				s.IdleCPUShare*100, s.LoadAvg, pv.Short(), pv.CPUs, strings.ReplaceAll(s.Error, "|", "/"))
		}
		b.WriteString("\n| rate (calls/s) | proxy | median CPU ms/call | pairs with kamailio | median ratio to kamailio |\n")
		b.WriteString("|---|---|---|---|---|\n")
		for _, r := range rep.ByRate {
			for _, p := range []string{benchKamailio, benchLab, benchLabBare} {
				v, ok := r.MedianCPUMsCall[p]
				if !ok {
					continue
				}
				pairs, ratio := "", ""
				if p != benchKamailio {
					pairs, ratio = strconv.Itoa(len(r.Ratios[p])), fmt.Sprintf("%.2f", median(r.Ratios[p]))
				}
				fmt.Fprintf(&b, "| %g | %s | %.3f | %s | %s |\n", r.Rate, p, v, pairs, ratio)
			}
		}
		fmt.Fprintf(&b, "\n**Median ratio lab/kamailio over all pairs: %.2f**\n", rep.MedianRatio)
	}
	benchLabMarkdown(&b, rep)
	return b.String()
}

// RelayConfig configures Relay: the lab's proxy run alone (imslab bench relay).
type RelayConfig struct {
	// Listen is the SIP UDP address; Next the ip:port every initial request is relayed to; Host the proxy's host
	// name (its Record-Route).
	Listen, Next, Host string
	// Trust are the ip:port of the peers treated as core nodes.
	Trust []string
	// Events and Trace, when set, record events (JSON lines) and the message trace (pcapng) as a lab node does.
	Events, Trace string
	// MemoryLimitMiB is the Go runtime's soft memory limit (GOMEMLIMIT overrides).
	MemoryLimitMiB int64
}

// Validate names the first field that cannot run.
func (c RelayConfig) Validate() error {
	if c.Next == "" {
		return errors.New("--next is required")
	}
	if _, _, err := net.SplitHostPort(c.Next); err != nil {
		return fmt.Errorf("--next %q: %w", c.Next, err)
	}
	return nil
}

// Relay is the lab's proxy run alone: one sipx.Proxy, record-routing every initial request and relaying it
// through the Forwarder to a static next hop; in-dialog requests and ACKs follow their Route as on every node
// of the lab. The senders in Trust are core peers (as the lab's nodes are to each other), so their in-dialog
// requests may go to an IP address. It serves until ctx ends.
func Relay(ctx context.Context, c RelayConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(c.MemoryLimitMiB << 20)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rec, err := obs.OpenRecorder(c.Events, "bench")
	if err != nil {
		return err
	}
	defer rec.Close()
	ep, err := sipx.NewEndpoint(c.Host, c.Listen, log)
	if err != nil {
		return err
	}
	tracer, err := obs.OpenTracer(c.Trace, "bench", 0)
	if err != nil {
		return err
	}
	defer tracer.Close()
	ep.Trace(tracer)
	const nextHost = "next.bench.ims.test"
	res := pool.NewStaticResolver().SetSRV("_sip._udp."+nextHost, pool.Target{Name: nextHost, Addr: c.Next, Priority: 1, Weight: 10})
	px := sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Log: log, Rec: rec, Trust: sipx.NewTrust(sipx.Peers{SCSCF: c.Trust})},
		sipx.ForwarderConfig{}, c.Host)
	px.Start(ctx)
	px.Serve(sipx.Handlers{Request: func(r *sipx.Request) {
		if r.InDialog() {
			px.InDialog(r)
			return
		}
		r.Out.PrependHeader(&sip.RecordRouteHeader{Address: sipx.RouteURI("", c.Host)})
		px.Finish(r.Tx, r.Req, px.Fwd.Forward(r.Ctx, r.Tx, r.Out, sipx.SRVHop(nextHost)))
	}})
	fmt.Fprintf(os.Stderr, "bench relay on %s → %s\n", ep.Addr, c.Next)
	return ep.Serve(ctx)
}
