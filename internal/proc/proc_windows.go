package proc

import (
	"fmt"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// sysGroup is a job object that kills its processes when its last handle
// closes: at release, or when flowrun dies.
type sysGroup struct{ job windows.Handle }

func prepare(*exec.Cmd) {}

// supervise does nothing: the job holds every process the group starts.
func supervise(*exec.Cmd) {}

// Main does nothing on Windows: a job object dies with flowrun's handle
// to it, so no reaper is needed.
func Main() {}

// attach puts the started process in a new job. The processes it starts
// from then on are in the job too; it has had no time to start any.
func (s *sysGroup) attach(pid int) error {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("creating a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("setting up a job object: %w", err)
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("opening process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("putting process %d in a job object: %w", pid, err)
	}
	s.job = job
	return nil
}

func (s *sysGroup) kill() error { return windows.TerminateJobObject(s.job, 1) }

// terminate kills at once: Windows has no signal a console-less child
// could catch to clean up.
func (s *sysGroup) terminate() error { return s.kill() }

func (s *sysGroup) release() { windows.CloseHandle(s.job) }

const memoryEnforced = false

func (s *sysGroup) rss() int64 { return 0 }
