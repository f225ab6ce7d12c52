package results

import (
	"math"
	"strconv"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

// num writes a number of a table (stats.Short).
func num(x float64) string { return stats.Short(x) }

// round2 is x rounded to two decimals (half away from zero).
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// r2 is round2 written as a number, "–" when absent.
func r2(x *float64) string {
	if x == nil {
		return "–"
	}
	return num(round2(*x))
}

func itoa(n int) string { return strconv.Itoa(n) }
