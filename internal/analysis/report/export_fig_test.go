package report

// WriteRestoreFigure exposes writeRestoreFigure: the run's restoration figure in every form under runDir/plots.
func WriteRestoreFigure(runDir string, sv *Survival, printForms bool) (files []string, svg []byte, err error) {
	return writeRestoreFigure(runDir, sv, printForms)
}
