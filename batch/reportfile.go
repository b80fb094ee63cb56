package batch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/store"
)

// WriteReportFile writes batch b's report (WriteReport, compared with a
// when a is not nil) to path: beside it first, then renamed into place,
// so that a failure leaves any earlier report whole.
func WriteReportFile(ctx context.Context, st *store.Store, path string, b, a *store.Batch) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := WriteReport(ctx, st, f, b, a); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
