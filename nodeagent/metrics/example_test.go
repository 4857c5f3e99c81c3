package metrics_test

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/nodeagent/metrics"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// idleNode is a Source whose node runs no VMI: a scrape asks no launcher,
// so the method it does not call comes from the embedded (nil) Source.
type idleNode struct{ metrics.Source }

func (idleNode) NodeName() string { return "node01" }

func (idleNode) CachedVMIs() ([]*v1.VirtualMachineInstance, error) { return nil, nil }

// The node agent reports what it did on its Metrics (in virt-handler, the
// nodeagent.Agent is the Source and serves Registry on /metrics). A
// domain's state replaces the one recorded before it.
func Example() {
	m := metrics.New(idleNode{}, 0)
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm1"}}
	m.SetDomainState(vmi, "Running")
	m.SetDomainState(vmi, "Paused")
	m.CountLauncherError("pause")

	families, err := m.Registry().Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch {
			case s.GetGauge() != nil && len(labels) > 0:
				fmt.Println(f.GetName(), strings.Join(labels, ","), s.GetGauge().GetValue())
			case s.GetCounter() != nil && len(labels) > 0:
				fmt.Println(f.GetName(), strings.Join(labels, ","), s.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// vmkit_nodeagent_launcher_errors_total op=pause 1
	// vmkit_nodeagent_vmi_domain_state name=vm1,namespace=default,state=Paused 1
}
