// Package procstat reads process resource use the same way on every
// platform flowrun builds for, for the benchmarks: this process's CPU time
// and a finished child's peak resident memory.
package procstat
