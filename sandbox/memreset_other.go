//go:build !linux

package sandbox

import "errors"

// dropWrites cannot drop a mapping's private pages in place here
// (MADV_DONTNEED keeps them on other systems), so instances are not kept.
func dropWrites([]byte) error {
	return errors.New("this system cannot reset a memory in place")
}
