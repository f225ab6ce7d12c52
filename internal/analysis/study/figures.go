package study

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
)

// DirFigures holds the study's figures, in <out>/.
const DirFigures = "figures"

// Figure is one figure of an experiment or a sweep: the screen SVG study.md embeds and, at a two-column paper's
// column width (3.5 in) and full width (7 in), the print forms as PDF, SVG and PNG (fonts of at least 8 pt at that
// size; figure.PrintForms).
type Figure struct {
	// Kind is "restore" (restoration curves), "interruption_ecdf", "restore_ecdf", "post_dial_delay",
	// "survivor_load", "kpi" (one KPI across the schemes) or "sweep".
	Kind string `json:"kind"`
	KPI  string `json:"kpi,omitempty"`
	// SVG is the screen form; Print the print forms (<name>.col.pdf … <name>.full.png), relative to the study's out
	// directory. A committed study keeps its screen SVGs; `imslab results <study>` draws the print forms again.
	SVG     string   `json:"svg"`
	Print   []string `json:"print,omitempty"`
	Title   string   `json:"title"`
	Caption string   `json:"caption"`
}

// kpiFigures are the KPIs drawn as dot plots with their CIs across the schemes.
var kpiFigures = []string{"affected_users", "time_to_detect_s", "restored_at_bound", "pool_cpu_ms_per_sub_hour",
	"repl_bytes_per_sub_hour"}

// colourOf is scheme i's colour (in file order; figure.SchemeColour).
func colourOf(i int) color.RGBA { return figure.SchemeColour(i) }

// userTimes are the probed affected users of one run: the time from the fault to the restoration of their
// service (MT and MO), or to the end of the observation for a user not restored (censored).
type userTimes struct {
	t        []float64
	restored []bool
}

// Sources of a run's restoration times.
const (
	srcUsers = "users"  // summary.json users[].restore_s / censored (the values users.csv holds)
	srcCurve = "curve"  // reconstructed from summary.json survival.service (no per-user times in the summary)
	srcNone  = "absent" // no reachability probes in the run
)

// restoreTimes returns a run's per-user restoration times and where they came from. summary.json's users carry
// each probed user's restore_s (absent and censored when not restored), the same values as the run's users.csv;
// a censored user is censored at its own fault → end of the run. A summary without per-user times (written by an
// older imslab, or trimmed) still has the Kaplan–Meier curve, whose points (restorations and users at risk at each
// restoration time) give back every restoration time and, between them, the censored users: the pooled curve is
// then the same as from the users. So does a summary converted when read (written before restoration was timed
// at the answer), whose users lost their restore_s.
func restoreTimes(s *report.Summary) (userTimes, string) {
	sv := s.Survival
	if sv == nil || sv.Service.N == 0 {
		return userTimes{}, srcNone
	}
	var u userTimes
	minT0 := math.Inf(1)
	withTimes := true // a user restored (not censored) without its time: the users do not carry their times
	for _, k := range s.Users {
		if k.Probed {
			minT0 = min(minT0, k.T0S)
			withTimes = withTimes && (k.RestoreS != nil || k.Censored)
		}
	}
	for _, k := range s.Users {
		if !k.Probed || !withTimes {
			continue
		}
		if k.RestoreS != nil && !k.Censored {
			u.t, u.restored = append(u.t, *k.RestoreS), append(u.restored, true)
			continue
		}
		// observed_s runs from the earliest fault among the probed users to the end of the run.
		u.t, u.restored = append(u.t, sv.ObservedS-(k.T0S-minT0)), append(u.restored, false)
	}
	if len(u.t) == sv.Service.N {
		return u, srcUsers
	}
	if u, ok := curveTimes(&sv.Service, sv.ObservedS); ok {
		return u, srcCurve
	}
	return userTimes{}, srcNone // a curve without its points
}

// curveTimes gives back the users of a Kaplan–Meier curve from its points: the restorations at each point's time
// and, between two points, the users censored (at risk at one, gone by the next; censored at the earlier time, or
// at the end of the observation after the last point). False when the points do not account for the curve's n.
func curveTimes(c *report.KMCurve, observedS float64) (userTimes, bool) {
	var u userTimes
	pts := c.Points
	for i, p := range pts {
		for range p.Events {
			u.t, u.restored = append(u.t, p.TS), append(u.restored, true)
		}
		left := p.AtRisk - p.Events // still at risk after this time
		next := 0
		if i+1 < len(pts) {
			next = pts[i+1].AtRisk
		}
		at := p.TS
		if i+1 == len(pts) {
			at = observedS
		}
		for range left - next {
			u.t, u.restored = append(u.t, at), append(u.restored, false)
		}
	}
	return u, c.N > 0 && len(u.t) == c.N
}

// runCurves are one run's restoration times at the answer and, where the summary has them, at the probe's start
// (setup started), with where the first came from.
type runCurves struct {
	answer userTimes
	src    string
	setup  *userTimes
	// legacy: the summary was written before restoration was timed at the answer and converted when read
	// (survival.legacy).
	legacy bool
}

// curvesOf reads a run's restoration times at the answer (restoreTimes) and at the setup's start (its
// survival.setup_started curve's points).
func curvesOf(s *report.Summary) runCurves {
	u, src := restoreTimes(s)
	rc := runCurves{answer: u, src: src}
	if sv := s.Survival; sv != nil {
		rc.legacy = sv.Legacy != ""
		if su, ok := curveTimes(&sv.SetupStarted, sv.ObservedS); ok {
			rc.setup = &su
		}
	}
	return rc
}

// schemeData is what the figures of one scheme of an experiment draw.
type schemeData struct {
	name    string
	runs    []userTimes // runs with probes: restoration at the answer
	setup   []userTimes // runs with the setup-started curve: restoration at the probe's start
	legacy  int         // runs whose summary predates timed_at (converted when read)
	sources map[string]int
	nRuns   int // runs with a report
	mo, mt  []float64
	// moRestore, mtRestore: the probed users' restoration times per direction (runs with per-user times);
	// moProbed, mtProbed the users probed in that direction in those runs (survival.mo.n, survival.mt.n).
	moRestore, mtRestore []float64
	moProbed, mtProbed   int
	probeRuns            int
	// boundS is each run's own bound: the last node's detection plus one probe interval (survival.bound_s).
	boundS   []float64
	colour   color.RGBA
	affected int
	pdd      postDialDelay
	load     survivorLoad
}

func collect(er *ExperimentResult, results []RunResult) []*schemeData {
	var out []*schemeData
	for i, v := range er.Variants {
		d := &schemeData{name: v.Variant, sources: map[string]int{}, colour: colourOf(i)}
		for _, r := range results {
			if r.Experiment != er.Name || r.Variant != v.Variant || r.Summary == nil || r.Err != nil {
				continue
			}
			s := r.Summary
			d.nRuns++
			d.affected += s.AffectedUsers
			for _, u := range s.Users {
				if u.MOInterruptionS != nil {
					d.mo = append(d.mo, *u.MOInterruptionS)
				}
				if u.MTInterruptionS != nil {
					d.mt = append(d.mt, *u.MTInterruptionS)
				}
			}
			rc := curvesOf(s)
			d.sources[rc.src]++
			if _, src := restoreTimes(s); src == srcUsers {
				d.probeRuns++
				d.moProbed += s.Survival.MO.N
				d.mtProbed += s.Survival.MT.N
				for _, u := range s.Users {
					if u.MORestoreS != nil {
						d.moRestore = append(d.moRestore, *u.MORestoreS)
					}
					if u.MTRestoreS != nil {
						d.mtRestore = append(d.mtRestore, *u.MTRestoreS)
					}
				}
			}
			if rc.src != srcNone {
				d.runs = append(d.runs, rc.answer)
				if s.Survival.BoundS > 0 {
					d.boundS = append(d.boundS, s.Survival.BoundS)
				}
				if rc.legacy {
					d.legacy++
				}
			}
			if rc.setup != nil {
				d.setup = append(d.setup, *rc.setup)
			}
			d.pdd.add(s)
			d.load.add(s)
		}
		out = append(out, d)
	}
	return out
}

// experimentFigure draws one figure of an experiment: its builder (nil when the data are missing), what the
// study records of it, and an error.
type experimentFigure func(er *ExperimentResult, data []*schemeData, seed uint64) (figure.Builder, Figure, error)

// WriteFigures draws every experiment's figures into <dir>/figures/ (replacing what was there) and lists them
// in r's experiments: each in its screen form and, with printForms, its print forms. Experiments or schemes without the
// data a figure needs leave it out (the figure's caption, or its absence from study.md, says so).
func WriteFigures(dir string, r *Result, results []RunResult, printForms bool) error {
	fdir := filepath.Join(dir, DirFigures)
	if err := os.RemoveAll(fdir); err != nil {
		return fmt.Errorf("study: figures: %w", err)
	}
	if err := os.MkdirAll(fdir, 0o755); err != nil {
		return fmt.Errorf("study: figures: %w", err)
	}
	for i := range r.Experiments {
		er := &r.Experiments[i]
		er.Figures = nil
		data := collect(er, results)
		seed := uint64(er.Seed)
		er.FigureNotes = nil
		runs := 0
		for _, d := range data {
			runs += d.nRuns
		}
		for k, f := range []experimentFigure{restoreFigure, ecdfFigure, restoreECDFFigure} {
			b, fig, err := f(er, data, seed)
			if err != nil {
				return err
			}
			if b == nil {
				if runs > 0 {
					er.FigureNotes = append(er.FigureNotes, missingFigure[k])
				}
				continue
			}
			if err := save(b, dir, &fig, printForms); err != nil {
				return err
			}
			er.Figures = append(er.Figures, fig)
		}
		// Figures of data only some runs have (a newer imslab's summary keys): absent without a note.
		for _, f := range []experimentFigure{postDialDelayFigure, survivorLoadFigure} {
			b, fig, err := f(er, data, seed)
			if err != nil {
				return err
			}
			if b == nil {
				continue
			}
			if err := save(b, dir, &fig, printForms); err != nil {
				return err
			}
			er.Figures = append(er.Figures, fig)
		}
		for _, k := range kpiFigures {
			if k == "affected_users" && !faulted(*er) {
				continue // an experiment without a fault (studies/cost.yaml): a row of zeros says nothing
			}
			b, fig, err := kpiFigure(er, data, k)
			if err != nil {
				return err
			}
			if b == nil {
				continue
			}
			if err := save(b, dir, &fig, printForms); err != nil {
				return err
			}
			er.Figures = append(er.Figures, fig)
		}
	}
	return writeSweepFigures(dir, r, printForms)
}

// missingFigure says why restoreFigure, ecdfFigure and restoreECDFFigure drew nothing.
var missingFigure = []string{
	"No restoration curves: the runs have no reachability probes (traffic.reachability) or no probed users.",
	"No ECDF of the interruption: no affected user had an answered call of its own traffic after the fault " +
		"(with few calls per user and hour that is usual in a short run; the probes measure the same per direction).",
	"No ECDF of the time to restore: the runs have no per-user probe results.",
}

// save draws the figure in its screen form (figures/<fig.SVG>.svg) and, with printForms, its print forms
// (figures/<fig.SVG>.col.pdf … .full.png); fig.SVG holds the name on entry and the screen form's path on return.
func save(b figure.Builder, dir string, fig *Figure, printForms bool) error {
	w, err := figure.Write(dir, filepath.Join(DirFigures, fig.SVG), b, printForms)
	if err != nil {
		return fmt.Errorf("study: figure %s: %w", fig.SVG, err)
	}
	fig.SVG, fig.Print = w.Screen, w.Print
	return nil
}

// printNote says where a figure's print forms are (study.md and results.md list the screen form).
const printNote = "Each figure also comes at a paper's column width (3.5 in) and full width (7 in) as PDF, SVG and " +
	"PNG beside its screen SVG (`figures/<name>.col.pdf` … `<name>.full.png`, fonts of at least 8 pt at that " +
	"size); a committed study keeps the screen SVGs, and `imslab results <study>` draws the print forms again."

// readFigures returns the figures study.json lists, by experiment (those of the previous invocation, while a
// study runs).
func readFigures(dir string) (map[string]ExperimentResult, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := map[string]ExperimentResult{}
	for _, e := range r.Experiments {
		out[e.Name] = e
	}
	return out, nil
}

// positiveRange is the smallest and largest positive value of the series (false when there is none).
func positiveRange(series ...[]float64) (lo, hi float64, found bool) {
	lo = math.Inf(1)
	for _, xs := range series {
		for _, x := range xs {
			if x > 0 {
				lo, hi, found = min(lo, x), max(hi, x), true
			}
		}
	}
	return lo, hi, found
}
