package sandbox

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// A Python instance that ends its call exactly as the image left it is
// kept for the next call instead of being closed and made again, which is
// most of a trivial call's CPU (docs/sandbox.md, "Warm calls"). wazero has
// no way to reset an instance, so nothing is reset that could hide a
// change: the instance is kept only when it is provably back to the
// image, and thrown away otherwise.
//
//   - WASI state: every WASI function that could change the instance's
//     file table, a file's position or its exit is watched (wasiWatch);
//     one call of any of them throws the instance away.
//   - Clocks: the instance's clocks are callClock, set back to their
//     start before each call, so a kept instance reads the times a new
//     one would. The random source is the host's CSPRNG, with no state.
//   - Memory: one that grew cannot shrink, so it is thrown away; else
//     the image's bytes are copied back into the pages the call wrote
//     (restoreWrites), and it reads as the image again.
//   - Globals: kept only when every mutable global holds its saved value
//     (wazero lets the host read them, not set them).
//   - Table: the image is refused for reuse when the module's code can
//     change a table (tableWrites).
//   - A call that failed (a trap, the output cap, proc_exit) or timed out
//     (the worker is killed) ends its instance; so does the
//     maxReuses-th call, as a belt.

// maxReuses bounds how many calls one instance serves.
const maxReuses = 100

// wasiWatch marks the host's current call as having changed WASI state.
// Only the functions that cannot change an instance's state get no
// listener; wazero then calls them as before, at no cost.
type wasiWatch struct{ changed *bool }

func (w wasiWatch) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	switch def.Name() {
	case "args_get", "args_sizes_get", "environ_get", "environ_sizes_get",
		"clock_res_get", "clock_time_get", "random_get", "sched_yield",
		"fd_fdstat_get", "fd_prestat_get", "fd_prestat_dir_name",
		"fd_filestat_get", "path_filestat_get":
		return nil
	case "fd_read", "fd_write", "fd_tell":
		// Reading stdin, writing stdout and stderr and asking their
		// position (which they have not: the harness asks) moves nothing
		// the instance keeps: stdio is rebound to each job. The fd is an
		// i32; the upper half of its slot is not cleared.
		return experimental.FunctionListenerFunc(func(_ context.Context, _ api.Module, _ api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
			if uint32(params[0]) > 2 {
				*w.changed = true
			}
		})
	}
	return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
		*w.changed = true
	})
}

// callClock is a fake clock as wazero's default (its first reading the
// start, each reading 1 ms later), set back to its start by reset.
type callClock struct{ wall, mono int64 }

const (
	clockStep  = 1_000_000                 // 1 ms, as wazero's fake clocks
	clockEpoch = 1640995200000 * 1_000_000 // wazero's fake walltime's start
)

func (c *callClock) reset() { c.wall, c.mono = clockEpoch, 0 }

func (c *callClock) walltime() (int64, int32) {
	t := c.wall
	c.wall += clockStep
	return t / 1e9, int32(t % 1e9)
}

func (c *callClock) nanotime() int64 {
	t := c.mono
	c.mono += clockStep
	return t
}

// clockResolutions are wazero's for its fake clocks.
const (
	walltimeResolution = sys.ClockResolution(1000)
	nanotimeResolution = sys.ClockResolution(1)
)

// keep says whether inst, whose call just ended with runErr, is back to
// img and may serve the next call once its memory is reset; why not, if
// not.
func (h *host) keep(inst *instance, img *pythonImage, runErr error) error {
	switch {
	case img.noReuse != "":
		return errors.New(img.noReuse)
	case runErr != nil || inst.mem.refused:
		return errors.New("the call failed or was refused memory")
	case h.wasiChanged:
		return errors.New("the call changed WASI state")
	case inst.reuses+1 >= maxReuses:
		return errors.New("the instance served its last call")
	case uint64(inst.mod.Memory().Size()) != img.size:
		return errors.New("the call grew its memory")
	}
	im := inst.mod.(experimental.InternalModule)
	for i, v := range img.globals {
		if im.Global(i).Get() != v {
			return errors.New("a global is not back to its saved value")
		}
	}
	return nil
}
