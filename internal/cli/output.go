package cli

import "os"

// openOutput opens the results file. A fresh run (plan nil) truncates it.
// A resumed run keeps the lines already there that plan keeps (see
// [outputPlan.reconcile]) and appends, returning the indexes those lines
// hold, so that every input ends with exactly one line.
func openOutput(path string, plan *outputPlan) (*os.File, map[int]bool, error) {
	if plan == nil {
		f, err := os.Create(path)
		return f, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	written, err := plan.reconcile(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, written, nil
}
