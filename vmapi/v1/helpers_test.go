package v1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestVirtualMachineRunStrategy(t *testing.T) {
	tests := []struct {
		name        string
		running     *bool
		runStrategy *v1.VirtualMachineRunStrategy
		want        v1.VirtualMachineRunStrategy
		wantErr     bool
	}{
		{name: "neither set", want: v1.RunStrategyHalted},
		{name: "running true", running: v1.BoolPtr(true), want: v1.RunStrategyAlways},
		{name: "running false", running: v1.BoolPtr(false), want: v1.RunStrategyHalted},
		{name: "runStrategy Always", runStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways), want: v1.RunStrategyAlways},
		{name: "runStrategy RerunOnFailure", runStrategy: v1.RunStrategyPtr(v1.RunStrategyRerunOnFailure), want: v1.RunStrategyRerunOnFailure},
		{name: "runStrategy Manual", runStrategy: v1.RunStrategyPtr(v1.RunStrategyManual), want: v1.RunStrategyManual},
		{name: "runStrategy Halted", runStrategy: v1.RunStrategyPtr(v1.RunStrategyHalted), want: v1.RunStrategyHalted},
		{name: "runStrategy Once", runStrategy: v1.RunStrategyPtr(v1.RunStrategyOnce), want: v1.RunStrategyOnce},
		{name: "runStrategy WaitAsReceiver", runStrategy: v1.RunStrategyPtr(v1.RunStrategyWaitAsReceiver), want: v1.RunStrategyWaitAsReceiver},
		{name: "running true and runStrategy", running: v1.BoolPtr(true), runStrategy: v1.RunStrategyPtr(v1.RunStrategyAlways), want: v1.RunStrategyUnknown, wantErr: true},
		{name: "running false and runStrategy", running: v1.BoolPtr(false), runStrategy: v1.RunStrategyPtr(v1.RunStrategyHalted), want: v1.RunStrategyUnknown, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := &v1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Name: "testvm", Namespace: "default"},
				Spec:       v1.VirtualMachineSpec{Running: tt.running, RunStrategy: tt.runStrategy},
			}
			got, err := vm.RunStrategy()
			if (err != nil) != tt.wantErr {
				t.Fatalf("RunStrategy() error = %v, want error: %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("RunStrategy() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVirtualMachineInstanceIsFinal(t *testing.T) {
	tests := []struct {
		phase v1.VirtualMachineInstancePhase
		want  bool
	}{
		{v1.VmPhaseUnset, false},
		{v1.Pending, false},
		{v1.Scheduling, false},
		{v1.Scheduled, false},
		{v1.Running, false},
		{v1.Succeeded, true},
		{v1.Failed, true},
		{v1.Unknown, false},
	}
	for _, tt := range tests {
		t.Run("phase "+string(tt.phase), func(t *testing.T) {
			vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: tt.phase}}
			if got := vmi.IsFinal(); got != tt.want {
				t.Errorf("IsFinal() in phase %q = %v, want %v", tt.phase, got, tt.want)
			}
		})
	}
}

func TestVirtualMachineInstanceMigrationIsFinal(t *testing.T) {
	tests := []struct {
		phase v1.VirtualMachineInstanceMigrationPhase
		want  bool
	}{
		{v1.MigrationPhaseUnset, false},
		{v1.MigrationPending, false},
		{v1.MigrationScheduling, false},
		{v1.MigrationScheduled, false},
		{v1.MigrationPreparingTarget, false},
		{v1.MigrationTargetReady, false},
		{v1.MigrationRunning, false},
		{v1.MigrationSucceeded, true},
		{v1.MigrationFailed, true},
	}
	for _, tt := range tests {
		t.Run("phase "+string(tt.phase), func(t *testing.T) {
			m := &v1.VirtualMachineInstanceMigration{Status: v1.VirtualMachineInstanceMigrationStatus{Phase: tt.phase}}
			if got := m.IsFinal(); got != tt.want {
				t.Errorf("IsFinal() in phase %q = %v, want %v", tt.phase, got, tt.want)
			}
		})
	}
}

func TestVirtualMachineInstanceDomainName(t *testing.T) {
	tests := []struct {
		namespace, name, want string
	}{
		{"default", "testvmi", "default_testvmi"},
		{"kube-system", "vm-1", "kube-system_vm-1"},
		{"", "testvmi", "_testvmi"},
	}
	for _, tt := range tests {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: tt.name}}
		if got := vmi.DomainName(); got != tt.want {
			t.Errorf("DomainName() of %s/%s = %q, want %q", tt.namespace, tt.name, got, tt.want)
		}
	}
}
