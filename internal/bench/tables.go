package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

// MemoryMarginal is the nodes' memory per extra registered phone from two memory points at the same
// registration rate (the registration burst's transactions cost the same in both, so the difference is the
// population's own cost) and a straight-line extrapolation to `to` phones: a table aligned in columns.
func MemoryMarginal(a, b *MemoryPoint, to int) string {
	mb := func(x float64) string { return stats.Short(math.Round(x/1e6*10) / 10) }
	dn := float64(b.RegisteredEnd - a.RegisteredEnd)
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\t%d phones\t%d phones\tper extra phone (bytes)\tat %d phones (extrapolated, MB)\n",
		a.RegisteredEnd, b.RegisteredEnd, to)
	row := func(name string, x, y float64) {
		per := (y - x) / dn
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, mb(x), mb(y), stats.Short(math.Round(per)),
			mb(y+per*float64(to-b.RegisteredEnd)))
	}
	row("nodes_peak_rss_bytes", float64(a.NodesPeakBytes), float64(b.NodesPeakBytes))
	row("nodes_last_rss_bytes", float64(a.NodesLastBytes), float64(b.NodesLastBytes))
	var pa, pb float64
	if a.PhonesProcess != nil {
		pa = float64(a.PhonesProcess.PeakBytes)
	}
	if b.PhonesProcess != nil {
		pb = float64(b.PhonesProcess.PeakBytes)
	}
	row("phones_process.peak_rss_bytes", pa, pb)
	tw.Flush()
	return sb.String()
}

// ReadMemoryPointFile reads a memory point written by imslab memory --json.
func ReadMemoryPointFile(path string) (*MemoryPoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mp MemoryPoint
	if err := json.Unmarshal(b, &mp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &mp, nil
}

// readCapacity0 is the first capacity step of a bench.json (nil when it has none).
func readCapacity0(path string) (*capacityStep, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep struct {
		Capacity []capacityStep `json:"capacity"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Capacity) == 0 {
		return nil, nil
	}
	return &rep.Capacity[0], nil
}

// CapacityLine is the one-line result of the capacity step of a bench run in dir (scripts/capacity-ab.sh prints
// it after each step): the nodes' CPU per answered call, the answered rate and the failed share.
func CapacityLine(dir string) (string, error) {
	s, err := readCapacity0(filepath.Join(dir, "bench.json"))
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", fmt.Errorf("%s: no capacity step", filepath.Join(dir, "bench.json"))
	}
	return fmt.Sprintf("   %s ms/call, %s answered/s, %s failed\n", stats.Short(s.NodesCPUMsPerCall),
		stats.Short(s.AnsweredPerS), stats.Short(s.FailureShare)), nil
}

// Setting is one setting of a settings comparison: its name and the environment imslab ran with.
type Setting struct{ Name, Env string }

// SettingsTable compares settings of the whole lab on the full chain from the capacity steps of
// dir/<name>-<k>/bench.json (scripts/capacity-ab.sh): per setting the nodes' CPU milliseconds per answered call,
// the answered rate (median and range over the repetitions), the largest failed share and the median setup p95.
// Steps that ended with an error are left out.
func SettingsTable(dir string, settings []Setting) (string, error) {
	var b strings.Builder
	b.WriteString("| setting | environment | n | nodes' CPU ms per answered call: median (min–max) | answered/s: median (min–max) | failed %: max | setup p95 to 180 (ms): median |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	r2 := func(x float64) string { return stats.Short(math.Round(x*100) / 100) }
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, st := range settings {
		files, err := filepath.Glob(filepath.Join(dir, st.Name+"-*", "bench.json"))
		if err != nil {
			return "", err
		}
		slices.Sort(files)
		var cpu, ans, failed, setup []float64
		for _, f := range files {
			s, err := readCapacity0(f)
			if err != nil {
				return "", err
			}
			if s == nil || s.Error != "" {
				continue
			}
			cpu, ans = append(cpu, s.NodesCPUMsPerCall), append(ans, s.AnsweredPerS)
			failed, setup = append(failed, s.FailureShare*100), append(setup, s.Setup180P95Ms)
		}
		env := cmp.Or(st.Env, "(as it is)")
		if len(cpu) == 0 {
			fmt.Fprintf(&b, "| %s | %s | 0 | – | – | – | – |\n", st.Name, env)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s (%s–%s) | %s (%s–%s) | %s | %s |\n", st.Name, env, len(cpu),
			r2(med(cpu)), r2(slices.Min(cpu)), r2(slices.Max(cpu)), r2(med(ans)), r2(slices.Min(ans)), r2(slices.Max(ans)),
			r2(slices.Max(failed)), stats.Short(med(setup)))
	}
	return b.String(), nil
}
