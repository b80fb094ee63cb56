package store

// alive reports whether pid is a running process that started when the
// run's holder did (so a recycled pid does not count).
func alive(pid int, start string) bool {
	if pid <= 0 || !processRunning(pid) {
		return false
	}
	return start == "" || processStart(pid) == start
}
