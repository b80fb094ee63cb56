//go:build !linux

package sandbox

import "errors"

// restoreWrites cannot tell a mapping's private pages here (Linux's
// /proc/self/pagemap does), nor drop them in place (MADV_DONTNEED keeps
// them on other systems), so instances are not kept.
func restoreWrites([]byte, *imageCopy) error {
	return errors.New("this system cannot reset a memory in place")
}
