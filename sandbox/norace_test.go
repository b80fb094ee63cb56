//go:build !race

package sandbox

const raceBuilt = false
