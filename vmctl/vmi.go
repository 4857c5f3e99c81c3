package vmctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The operations on running VirtualMachineInstances: pause, unpause, soft
// reboot, reset and the guest agent queries.

const (
	kindVM  = "vm"
	kindVMI = "vmi"
)

// normalizeKind maps the names virtctl accepts for VMs and VMIs (singular,
// plural, short, any case) to kindVM or kindVMI.
func normalizeKind(kind string) (string, error) {
	switch strings.ToLower(kind) {
	case "vm", "vms", "virtualmachine", "virtualmachines":
		return kindVM, nil
	case "vmi", "vmis", "virtualmachineinstance", "virtualmachineinstances":
		return kindVMI, nil
	}
	return "", fmt.Errorf("unsupported resource type %q: use vm or vmi", kind)
}

// pauseCommand is "pause" or "unpause" of a VM's instance or a VMI.
func (c *cli) pauseCommand(verb string) *cobra.Command {
	var dry bool
	short := "Pause a virtual machine."
	long := `Pauses a virtual machine by freezing it. Machine state is kept in memory.`
	if verb == "unpause" {
		short, long = "Unpause a virtual machine.", `Unpauses a virtual machine.`
	}
	cmd := &cobra.Command{
		Use:   verb + " vm|vmi (VM)|(VMI)",
		Short: short,
		Long: long + `
First argument is the resource type, possible types are (case insensitive, both singular and plural forms) virtualmachineinstance (vmi) or virtualmachine (vm).
Second argument is the name of the resource.`,
		Example: c.example("  # " + strings.ToUpper(verb[:1]) + verb[1:] + " a virtual machine called 'myvm':\n  %[1]s " + verb + " vm myvm"),
		Args:    cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []cobra.Completion{kindVM, kindVMI}, cobra.ShellCompDirectiveNoFileComp
			}
			kind, err := normalizeKind(args[0])
			if err != nil || len(args) > 1 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return c.completeNames(kind, 0)(cmd, nil, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := normalizeKind(args[0])
			if err != nil {
				return err
			}
			name := args[1]
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			ctx := contextOf(cmd)
			dryRunOpt := dryRun(cmd, dry)
			var vm *v1.VirtualMachine
			if kind == kindVM {
				// virtctl reads the VM first, for a clear error when it
				// does not exist; its instance has its name.
				client, err := c.vmClient()
				if err != nil {
					return err
				}
				if vm, err = client.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
					return fmt.Errorf("error getting VirtualMachine %s: %w", name, err)
				}
			}
			if verb == "pause" {
				err = s.Pause(ctx, ns, name, v1.PauseOptions{DryRun: dryRunOpt})
			} else {
				err = s.Unpause(ctx, ns, name, v1.UnpauseOptions{DryRun: dryRunOpt})
			}
			if err != nil {
				verbing := strings.TrimSuffix(verb, "e") + "ing"
				if vm != nil && apierrors.IsNotFound(err) {
					if rs, rsErr := vm.RunStrategy(); rsErr == nil && rs == v1.RunStrategyHalted {
						return fmt.Errorf("error %s VirtualMachineInstance %s: VirtualMachine %s is not set to run", verbing, name, name)
					}
				}
				return fmt.Errorf("error %s VirtualMachineInstance %s: %w", verbing, name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VMI %s was scheduled to %s\n", name, verb)
			return nil
		},
	}
	addDryRunFlag(cmd, &dry)
	return cmd
}

func (c *cli) softRebootCommand() *cobra.Command {
	return c.vmiActionCommand("soft-reboot", "Soft reboot a virtual machine instance.",
		"Asks the guest to reboot itself, through its guest agent or an ACPI event.",
		"Soft reboot", "soft rebooting", (*Subresources).SoftReboot)
}

// resetCommand is virtctl's reset: a hard reset of the guest.
func (c *cli) resetCommand() *cobra.Command {
	return c.vmiActionCommand("reset", "Reset a virtual machine instance.",
		"Resets the guest at once, like a computer's reset button: it boots again without shutting down; it needs neither a guest agent nor ACPI.",
		"Reset", "resetting", (*Subresources).Reset)
}

// vmiActionCommand is a command "<name> (VMI)" that calls one subresource
// of the VMI (soft-reboot, reset) and says it was scheduled, as virtctl does.
func (c *cli) vmiActionCommand(name, short, long, exampleVerb, errVerb string, call func(*Subresources, context.Context, string, string) error) *cobra.Command {
	return &cobra.Command{
		Use:               name + " (VMI)",
		Short:             short,
		Long:              long,
		Example:           c.example("  # " + exampleVerb + " a virtual machine instance called 'myvmi':\n  %[1]s " + name + " myvmi"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVMI, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			if err := call(s, contextOf(cmd), ns, args[0]); err != nil {
				return fmt.Errorf("error %s VirtualMachineInstance %s: %w", errVerb, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VMI %s was scheduled to %s\n", args[0], name)
			return nil
		},
	}
}

// guestQueryCommand is guestosinfo, userlist or fslist: a guest agent
// query whose answer is printed as indented JSON, as virtctl does.
func (c *cli) guestQueryCommand(name string) *cobra.Command {
	texts := map[string]struct{ short, what string }{
		"guestosinfo": {"Return guest agent info about operating system.", "getting guestosinfo of"},
		"userlist":    {"Return full list of logged in users on the guest machine.", "listing users of"},
		"fslist":      {"Return full list of filesystems available on the guest machine.", "listing filesystems of"},
	}
	short, what := texts[name].short, texts[name].what
	return &cobra.Command{
		Use:               name + " (VMI)",
		Short:             short,
		Example:           c.example("  # " + short + "\n  %[1]s " + name + " myvmi"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVMI, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			ctx := contextOf(cmd)
			var result any
			switch name {
			case "guestosinfo":
				result, err = s.GuestOSInfo(ctx, ns, args[0])
			case "userlist":
				result, err = s.UserList(ctx, ns, args[0])
			default:
				result, err = s.FileSystemList(ctx, ns, args[0])
			}
			if err != nil {
				return fmt.Errorf("error %s VirtualMachineInstance %s: %w", what, args[0], err)
			}
			data, err := json.MarshalIndent(result, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", data)
			return nil
		},
	}
}

// completeNames completes the names of VMs or VMIs in the namespace, for
// commands taking at most maxArgs names (0: no limit, for flags).
func (c *cli) completeNames(kind string, maxArgs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if maxArgs > 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := c.namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		client, err := c.vmClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := contextOf(cmd)
		var names []cobra.Completion
		if kind == kindVM {
			list, err := client.KubevirtV1().VirtualMachines(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, vm := range list.Items {
				names = append(names, vm.Name)
			}
		} else {
			list, err := client.KubevirtV1().VirtualMachineInstances(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, vmi := range list.Items {
				names = append(names, vmi.Name)
			}
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
