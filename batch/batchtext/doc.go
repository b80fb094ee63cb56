// Package batchtext renders batch summaries, progress and comparisons as
// terminal text: fixed-width columns of plain lines, the figures as batch
// computes them (nothing here decides or counts anything). It writes what
// it is given as it is: a caller writing to a terminal passes a writer
// that makes control characters harmless. It never names a command to
// type; the front end adds those lines.
package batchtext
