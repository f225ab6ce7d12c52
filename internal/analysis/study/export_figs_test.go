package study

import (
	"encoding/json"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// PostDialDelayFigure draws experiment exp's post-dial-delay figure into dir/figures from the summary.json texts of
// each scheme's runs (summaries[i] are schemes[i]'s); false when it draws nothing.
func PostDialDelayFigure(dir, exp string, schemes []string, summaries [][][]byte) (Figure, bool, error) {
	var data []*schemeData
	for i, name := range schemes {
		d := &schemeData{name: name, colour: colourOf(i)}
		for _, b := range summaries[i] {
			var s report.Summary
			if err := json.Unmarshal(b, &s); err != nil {
				return Figure{}, false, err
			}
			d.pdd.add(&s)
		}
		data = append(data, d)
	}
	b, fig, err := postDialDelayFigure(&ExperimentResult{Name: exp}, data, 0)
	if err != nil || b == nil {
		return fig, false, err
	}
	return fig, true, save(b, dir, &fig, true)
}
