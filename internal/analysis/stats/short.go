package stats

import (
	"math"
	"strconv"
	"strings"
)

// Short writes x with the fewest digits that read back as the same float64, as the documents' generated tables
// always have (they were once written by jq): a decimal, with an exponent only below 1e-4 or more than 15 places
// past its significant digits ("1e-05", "1e+16"); "-0" for negative zero, "null" for NaN and infinities.
func Short(x float64) string {
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
