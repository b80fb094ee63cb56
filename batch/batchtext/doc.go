// Package batchtext renders batch summaries, progress and comparisons as
// terminal text: fixed-width columns of plain lines. The figures come from
// package batch; this package words and lays them out (the live line's
// items per second and time left are the only figures it works out). It
// writes what it is given as it is: a caller writing to a terminal passes
// a writer that makes control characters harmless. It never names a
// command to type; the front end adds those lines.
package batchtext
