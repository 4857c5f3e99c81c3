//go:build !unix

package podtemplate

import "time"

func processCPUTime() (time.Duration, bool) { return 0, false }
