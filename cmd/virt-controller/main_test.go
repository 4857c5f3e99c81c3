package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// --feature-gates as installstrategy writes it, and as a person might.
func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"":                   nil,
		"HostDisk":           {"HostDisk"},
		"HostDisk,Snapshot":  {"HostDisk", "Snapshot"},
		" HostDisk , ,Snap ": {"HostDisk", "Snap"},
	} {
		if diff := cmp.Diff(want, splitList(in)); diff != "" {
			t.Errorf("splitList(%q) (-want +got):\n%s", in, diff)
		}
	}
}
