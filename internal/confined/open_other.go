//go:build !unix

package confined

import "os"

// Windows has no named pipes in the file system to block on.
const openFlags = os.O_RDONLY
