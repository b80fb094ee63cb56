package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
	"github.com/flowrun/flowrun/store"
)

// installPython is the command that installs what a sandbox missing
// Python for WASI needs.
const installPython = "run flowrun sandbox install python"

// explain is err's message followed by the command that deals with it:
// the library packages say what is wrong, the CLI says what to type.
func explain(err error) string {
	return err.Error() + hint(err)
}

// hint is the command to type about err, worded to follow its message;
// "" when there is none.
func hint(err error) string {
	var nf *store.NotFoundError
	var changed *engine.ChangedError
	var done *engine.CompletedError
	var batchChanged *batch.ChangedError
	var build *sandbox.BuildError
	var unavailable *sandbox.UnavailableError
	var inputs *runtime.InputsError
	switch {
	case errors.As(err, &inputs) && len(inputs.Missing) > 0:
		return fmt.Sprintf("\nGive each with --input %s=VALUE, or all in a file with --inputs FILE", inputs.Missing[0])
	case errors.As(err, &unavailable) && unavailable.Missing == sandbox.Python:
		return ": " + installPython
	case errors.Is(err, engine.ErrNoEndpoint):
		return ", or replay a recorded run with --replay FILE"
	case errors.As(err, &changed):
		return fmt.Sprintf("\nTo resume anyway: flowrun resume %s --allow-changed", changed.Run)
	case errors.As(err, &done):
		return fmt.Sprintf("; to run part of it again, fork it: flowrun resume %s --from SNAPSHOT|CHECKPOINT", done.Run)
	case errors.As(err, &batchChanged):
		h := ". Start a new batch, or resume anyway with --allow-changed"
		if len(batchChanged.Changes) > 0 {
			h += "\n" + strings.Join(batchChanged.Changes, "\n")
		}
		return h
	case errors.As(err, &nf):
		return notFoundHint(nf)
	case errors.As(err, &build):
		h := ": "
		if build.Failed {
			h = "; or "
		}
		return h + "install it on a Debian-like Linux machine, run flowrun sandbox export there, " +
			"and here flowrun sandbox install python --from ARCHIVE (with ARCHIVE.sha256 beside it, or --sha256 HEX)"
	case errors.Is(err, sandbox.ErrNoChecksum):
		return ": pass --sha256 HEX, or put ARCHIVE.sha256 beside it (flowrun sandbox export prints the sha256 and writes that file)"
	case errors.Is(err, sandbox.ErrSHA256WithoutArchive):
		return " (--sha256 checks the archive --from names)"
	}
	return ""
}

func notFoundHint(e *store.NotFoundError) string {
	switch {
	case e.What == "checkpoint":
		return fmt.Sprintf(" (flowrun show %s lists them)", e.Run)
	case e.What == "snapshot":
		return fmt.Sprintf(" (flowrun snapshots %s lists them)", e.Run)
	case e.What == "item" && len(e.Similar) == 0:
		return fmt.Sprintf(" (flowrun batch show %s lists them)", e.In)
	case len(e.Similar) > 0:
		return ""
	case e.What == "run" && e.None:
		return ": flowrun PIPELINE.yaml starts one"
	case e.What == "batch" && e.None:
		return ": flowrun batch PIPELINE --dataset D starts one"
	}
	if e.What == "batch" {
		return ": flowrun batches lists them"
	}
	return ": flowrun runs lists them"
}

// runReason is why a run is as it is, with the command that continues a
// run a process left interrupted or a rollback left stopped.
func runReason(r *store.Run) string {
	switch {
	case r.Reason == "":
		return ""
	case r.Status == runtime.StatusInterrupted:
		return fmt.Sprintf("%s; flowrun resume %s continues it", r.Reason, r.ID)
	case strings.HasPrefix(r.Reason, store.RolledBack):
		return fmt.Sprintf("%s; flowrun resume %s continues from there", r.Reason, r.ID)
	}
	return r.Reason
}

// batchReason is why a batch is as it is, with the command that
// continues a batch a process left interrupted.
func batchReason(id string, status runtime.Status, reason string) string {
	if status == runtime.StatusInterrupted && reason != "" {
		return fmt.Sprintf("%s; flowrun batch resume %s continues it", reason, id)
	}
	return reason
}

// diagnosticsText renders ds as the CLI prints them: each with the
// command that may settle it, where there is one.
func diagnosticsText(ds dsl.Diagnostics) string {
	out := slices.Clone(ds)
	for i, d := range out {
		if d.MCPListing != "" {
			out[i].Message += "; flowrun validate --refresh-mcp lists them again"
		}
	}
	return out.String()
}
