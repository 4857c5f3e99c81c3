package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nrHugePagesFile sizes the host's pool of default-size (2 MiB on x86) huge
// pages, which the kubelet advertises as hugepages-2Mi.
const nrHugePagesFile = "/proc/sys/vm/nr_hugepages"

// hugePagesMarker, in KubeletRootDir, holds the pool's size before the node
// changed it, so that stop (or CleanupNode after a killed run) puts it back.
const hugePagesMarker = ".vmkit-nr-hugepages"

// ReserveHugePages sizes the host's 2 MiB huge page pool to pages before the
// kubelet starts (it reads the pool once), recording the size it had. The
// kernel may find fewer free contiguous pages than asked: that is an error
// naming both numbers.
func ReserveHugePages(pages int) error {
	before, err := readHugePages()
	if err != nil {
		return err
	}
	marker := filepath.Join(KubeletRootDir, hugePagesMarker)
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(marker, []byte(strconv.Itoa(before)+"\n"), 0o644); err != nil {
			return err
		}
	}
	var got int
	for attempt := 0; ; attempt++ {
		if err := os.WriteFile(nrHugePagesFile, []byte(strconv.Itoa(pages)), 0o644); err != nil {
			return fmt.Errorf("reserving %d huge pages of 2 MiB: %w", pages, err)
		}
		if got, err = readHugePages(); err != nil {
			return err
		}
		if got >= pages {
			return nil
		}
		if attempt == len(makeRoom) {
			break
		}
		// A machine that just built everything has most of its memory in
		// the page cache, in pieces: free some and compact it, then ask
		// again.
		makeRoom[attempt]()
	}
	return fmt.Errorf("asked the kernel for %d huge pages of 2 MiB (%s) and got %d, also after compacting memory and dropping clean caches: free memory is too fragmented or short; NodeOptions.HugePages2Mi asks for fewer", pages, nrHugePagesFile, got)
}

// makeRoom are the steps reserveHugePages takes, one before each new
// attempt, when the kernel found too few free 2 MiB pages: compact memory
// (/proc/sys/vm/compact_memory), then drop clean page cache
// (/proc/sys/vm/drop_caches, 1: nothing dirty is lost) and compact again.
var makeRoom = []func(){
	func() { _ = os.WriteFile("/proc/sys/vm/compact_memory", []byte("1"), 0o200) },
	func() {
		_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0o200)
		_ = os.WriteFile("/proc/sys/vm/compact_memory", []byte("1"), 0o200)
	},
}

// RestoreHugePages gives the pool back the size hugePagesMarker recorded
// and removes the marker; without a marker it does nothing.
func RestoreHugePages() error {
	marker := filepath.Join(KubeletRootDir, hugePagesMarker)
	data, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	before, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %w", marker, err)
	}
	if err := os.WriteFile(nrHugePagesFile, []byte(strconv.Itoa(before)), 0o644); err != nil {
		return fmt.Errorf("restoring %s to %d: %w", nrHugePagesFile, before, err)
	}
	return os.Remove(marker)
}

func readHugePages() (int, error) {
	data, err := os.ReadFile(nrHugePagesFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
