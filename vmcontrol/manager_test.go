package vmcontrol_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmcontrol"
)

func TestNewManagerRejectsBadLeaderElection(t *testing.T) {
	_, err := vmcontrol.NewManager(vmcontrol.Options{
		Config:      &rest.Config{Host: "https://127.0.0.1:1"},
		PodTemplate: &podtemplate.Config{LauncherImage: "vmkit/virt-launcher:test"},
		LeaderElection: vmcontrol.LeaderElection{Enabled: true,
			LeaseDuration: 5 * time.Second, RenewDeadline: 10 * time.Second},
	})
	if err == nil || !strings.Contains(err.Error(), "Options.LeaderElection") || !strings.Contains(err.Error(), "LeaseDuration") {
		t.Fatalf("NewManager with LeaseDuration < RenewDeadline = %v, want an error naming Options.LeaderElection and LeaseDuration", err)
	}
}
