package domainxml

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestConvertNil(t *testing.T) {
	if _, err := Convert(nil, Options{}); err == nil {
		t.Error("Convert(nil) succeeded")
	}
}

// TestConvertLeavesVMIAlone checks that Convert reads the VMI without
// changing it, even where it fills in defaults.
func TestConvertLeavesVMIAlone(t *testing.T) {
	for _, tc := range goldenCases {
		vmi := loadVMI(t, filepath.Join("testdata", tc.name+".vmi.yaml"))
		before := vmi.DeepCopy()
		if _, err := Convert(vmi, tc.opts); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(before, vmi); diff != "" {
			t.Errorf("%s: Convert changed the VMI (-before +after):\n%s", tc.name, diff)
		}
	}
}

// TestConvertConcurrent converts the same VMIs from several goroutines; run
// with -race to check Convert shares no state.
func TestConvertConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	want := map[string]string{}
	for _, tc := range goldenCases {
		dom, err := Convert(loadVMI(t, filepath.Join("testdata", tc.name+".vmi.yaml")), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		want[tc.name], _ = Marshal(dom)
	}
	for i := 0; i < 4; i++ {
		for _, tc := range goldenCases {
			vmi := loadVMI(t, filepath.Join("testdata", tc.name+".vmi.yaml"))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 20; j++ {
					dom, err := Convert(vmi, tc.opts)
					if err != nil {
						t.Error(err)
						return
					}
					if got, _ := Marshal(dom); got != want[tc.name] {
						t.Errorf("%s: concurrent conversion differs", tc.name)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
}

// TestConvertErrorIsFieldError checks that callers can read the field.
func TestConvertErrorIsFieldError(t *testing.T) {
	vmi := newVMI(withDisk(v1.Disk{Name: "lun-disk", DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{Bus: v1.DiskBusVirtio}}}, pvc))
	_, err := Convert(vmi, Options{})
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Convert error %v (%T), want *FieldError", err, err)
	}
	if fe.Field != "spec.domain.devices.disks[0].lun" || fe.Message != `not supported on bus "virtio"` {
		t.Errorf("FieldError = %+v", fe)
	}
	if err.Error() != `spec.domain.devices.disks[0].lun: not supported on bus "virtio"` {
		t.Errorf("Error() = %q", err.Error())
	}
}
