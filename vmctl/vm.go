package vmctl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// The VirtualMachine state changes: start, stop, restart and migrate, with
// virtctl's flags and messages.

func (c *cli) startCommand() *cobra.Command {
	var paused, dry bool
	cmd := &cobra.Command{
		Use:               "start (VM)",
		Short:             "Start a virtual machine.",
		Example:           c.example("  # Start a virtual machine called 'myvm':\n  %[1]s start myvm\n\n  # Start it with its vCPUs paused:\n  %[1]s start myvm --paused"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			opts := v1.StartOptions{Paused: paused, DryRun: dryRun(cmd, dry)}
			if err := s.Start(contextOf(cmd), ns, args[0], opts); err != nil {
				return fmt.Errorf("error starting VirtualMachine %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s was scheduled to start\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&paused, "paused", false, "If true, start the virtual machine in paused state.")
	addDryRunFlag(cmd, &dry)
	return cmd
}

// stopFlags are stop's and restart's: --force with --grace-period, as
// virtctl requires them together.
type stopFlags struct {
	gracePeriod int64
	force       bool
	dry         bool
}

func (f *stopFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.force, "force", false, "Only used when grace-period=0. If true, immediately remove the VMI pod from the API and bypass graceful deletion. Immediate deletion of some resources may result in inconsistency or data loss.")
	cmd.Flags().Int64Var(&f.gracePeriod, "grace-period", -1, "Period of time in seconds given to the VMI to terminate gracefully. Can only be set to 0 when --force is true (force deletion). Currently only setting 0 is supported.")
	addDryRunFlag(cmd, &f.dry)
}

// forced returns the grace period to send: nil unless --force, an error
// when only one of --force and --grace-period is given.
func (f *stopFlags) forced(cmd *cobra.Command) (*int64, error) {
	if cmd.Flags().Changed("grace-period") != f.force {
		return nil, errors.New("must both use --force=true and set --grace-period")
	}
	if !f.force {
		return nil, nil
	}
	g := f.gracePeriod
	return &g, nil
}

func (c *cli) stopCommand() *cobra.Command {
	var f stopFlags
	cmd := &cobra.Command{
		Use:               "stop (VM)",
		Short:             "Stop a virtual machine.",
		Example:           c.example("  # Stop a virtual machine called 'myvm':\n  %[1]s stop myvm\n\n  # Stop it at once, without waiting for the guest:\n  %[1]s stop myvm --force --grace-period=0"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			grace, err := f.forced(cmd)
			if err != nil {
				return err
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			opts := v1.StopOptions{GracePeriod: grace, DryRun: dryRun(cmd, f.dry)}
			if err := s.Stop(contextOf(cmd), ns, args[0], opts); err != nil {
				if grace != nil {
					return fmt.Errorf("error force stopping VirtualMachine %s: %w", args[0], err)
				}
				return fmt.Errorf("error stopping VirtualMachine %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s was scheduled to stop\n", args[0])
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func (c *cli) restartCommand() *cobra.Command {
	var f stopFlags
	cmd := &cobra.Command{
		Use:               "restart (VM)",
		Short:             "Restart a virtual machine.",
		Example:           c.example("  # Restart a virtual machine called 'myvm':\n  %[1]s restart myvm\n\n  # Restart it at once, deleting its pod without a grace period:\n  %[1]s restart myvm --force --grace-period=0"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			grace, err := f.forced(cmd)
			if err != nil {
				return err
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			opts := v1.RestartOptions{GracePeriodSeconds: grace, DryRun: dryRun(cmd, f.dry)}
			if err := s.Restart(contextOf(cmd), ns, args[0], opts); err != nil {
				if grace != nil {
					return fmt.Errorf("error force restarting VirtualMachine %s: %w", args[0], err)
				}
				return fmt.Errorf("error restarting VirtualMachine %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s was scheduled to restart\n", args[0])
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

func (c *cli) migrateCommand() *cobra.Command {
	var dry bool
	var selector map[string]string
	cmd := &cobra.Command{
		Use:               "migrate (VM)",
		Short:             "Migrate a virtual machine.",
		Example:           c.example("  # Live migrate the instance of a virtual machine called 'myvm' to another node:\n  %[1]s migrate myvm"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			opts := v1.MigrateOptions{DryRun: dryRun(cmd, dry), AddedNodeSelector: selector}
			if err := s.Migrate(contextOf(cmd), ns, args[0], opts); err != nil {
				return fmt.Errorf("error migrating VirtualMachine %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s was scheduled to migrate\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringToStringVar(&selector, "addedNodeSelector", nil, "key=value,key2=value2: an additional node selector for this migration; it can only restrict the constraints the VM already has.")
	addDryRunFlag(cmd, &dry)
	return cmd
}

func (c *cli) expandCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:     "expand --vm NAME",
		Short:   "Return the VirtualMachine object with expanded instancetype and preference.",
		Example: c.example("  # Expand a virtual machine called 'myvm':\n  %[1]s expand --vm myvm\n\n  # The same, as JSON:\n  %[1]s expand --vm myvm -o json"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("a VirtualMachine name must be given with --vm")
			}
			if output != "yaml" && output != "json" {
				return fmt.Errorf("unsupported output format %q: use yaml or json", output)
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			vm, err := s.ExpandSpec(contextOf(cmd), ns, name)
			if err != nil {
				return fmt.Errorf("error expanding VirtualMachine %s in namespace %s: %w", name, ns, err)
			}
			if vm.Kind == "" {
				vm.TypeMeta = metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"}
			}
			var data []byte
			if output == "json" {
				data, err = json.MarshalIndent(vm, "", "  ")
				data = append(data, '\n')
			} else {
				data, err = yaml.Marshal(vm)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "vm", "", "The name of the VirtualMachine to expand.")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "Output format: yaml or json.")
	_ = cmd.RegisterFlagCompletionFunc("vm", c.completeNames(kindVM, 0))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func addDryRunFlag(cmd *cobra.Command, dry *bool) {
	cmd.Flags().BoolVar(dry, "dry-run", false, "If true, the request is only validated: the server changes nothing.")
}
