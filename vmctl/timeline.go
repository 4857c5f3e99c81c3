package vmctl

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// timelineCommand prints a VMI's start timeline (its vmkit.io/start-timeline
// annotation): when each phase ended, how long it took and the total.
// vmkit's own; virtctl has none.
func (c *cli) timelineCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "timeline (VMI)",
		Short: "Show where the seconds of a virtual machine instance's start went.",
		Long: `Prints the start timeline vmkit records on a VMI when it first becomes Ready (its vmkit.io/start-timeline annotation):
each phase (created, podScheduled, imagesPulled, networkWired, disksPrepared, domainDefined, guestRunning,
agentConnected, ready), when it ended, and how long it took from the end of the phase before.`,
		Example:           c.example("  # Where did myvmi's start spend its time:\n  %[1]s timeline myvmi"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVMI, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := c.namespace()
			if err != nil {
				return err
			}
			client, err := c.vmClient()
			if err != nil {
				return err
			}
			vmi, err := client.KubevirtV1().VirtualMachineInstances(ns).Get(contextOf(cmd), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			s, ok := vmi.Annotations[v1.StartTimelineAnnotation]
			if !ok {
				return fmt.Errorf("VirtualMachineInstance %s/%s has no start timeline yet (annotation %s): it is written when the VMI first becomes Ready", ns, args[0], v1.StartTimelineAnnotation)
			}
			t, err := v1.ParseStartTimeline(s)
			if err != nil {
				return fmt.Errorf("VirtualMachineInstance %s/%s: %w", ns, args[0], err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PHASE\tENDED\tTOOK")
			for i, p := range t {
				fmt.Fprintf(w, "%s\t%s\t%.1fs\n", p.Phase, p.Time.UTC().Format("15:04:05.000"), t.Duration(i).Seconds())
			}
			fmt.Fprintf(w, "total\t\t%.1fs\n", t.Total().Seconds())
			return w.Flush()
		},
	}
}
