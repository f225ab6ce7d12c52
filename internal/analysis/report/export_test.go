package report

// TimelineOf reads a run directory and returns its timeline's window and per-bin counts by series name (the
// members', the Cx ones and the call outcomes), and the detection instants by node.
func TimelineOf(runDir string) (fromS, toS float64, series map[string][]float64, detections map[string]float64, err error) {
	r, err := loadRun(runDir)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	tl := analyse(r).buildTimeline(r)
	series, detections = map[string][]float64{}, map[string]float64{}
	for _, group := range [][]timelineSeries{tl.members, tl.cx, tl.calls} {
		for _, s := range group {
			series[s.name] = s.counts
		}
	}
	for _, d := range tl.detections {
		detections[d.node] = d.atS
	}
	return tl.fromS, tl.toS, series, detections, nil
}

// DistributionOf is the post-dial delay's summary of a sample.
func DistributionOf(xs []float64) *Distribution { return distribution(xs) }
