package testenv

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

// reserveHugePages sizes the host's 2 MiB huge page pool to pages before the
// kubelet starts (it reads the pool once), recording the size it had. The
// kernel may find fewer free contiguous pages than asked: that is an error
// naming both numbers.
func reserveHugePages(pages int) error {
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
	if err := os.WriteFile(nrHugePagesFile, []byte(strconv.Itoa(pages)), 0o644); err != nil {
		return fmt.Errorf("reserving %d huge pages of 2 MiB: %w", pages, err)
	}
	got, err := readHugePages()
	if err != nil {
		return err
	}
	if got < pages {
		return fmt.Errorf("asked the kernel for %d huge pages of 2 MiB (%s) and got %d: free memory is too fragmented or short; NodeOptions.HugePages2Mi asks for fewer", pages, nrHugePagesFile, got)
	}
	return nil
}

// restoreHugePages gives the pool back the size hugePagesMarker recorded
// and removes the marker; without a marker it does nothing.
func restoreHugePages() error {
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
