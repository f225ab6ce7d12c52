package results

import (
	"math"
	"strconv"
	"strings"
)

// num writes a number the way the tables always have (the shortest digits that read back as the same float64;
// an exponent only below 1e-4 or past 15 digits beyond the significant ones), so a table regenerated in Go
// reads the same as the one published before.
func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "null"
	}
	if x == 0 {
		if math.Signbit(x) {
			return "-0"
		}
		return "0"
	}
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := len(strings.TrimLeft(strings.ReplaceAll(mant, ".", ""), "-"))
	p, _ := strconv.Atoi(exp)
	if decpt := p + 1; decpt <= -4 || decpt > digits+15 {
		return e
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

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
