package vmctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// AddVolume hot-plugs a volume into VirtualMachine namespace/name (PUT
// .../virtualmachines/{name}/addvolume: the VM's template gets it and its
// running instance follows) or, with onVMI, into a VirtualMachineInstance
// no VM owns (.../virtualmachineinstances/{name}/addvolume).
func (s *Subresources) AddVolume(ctx context.Context, namespace, name string, onVMI bool, opts *v1.AddVolumeOptions) error {
	p := vmPath(namespace, name, "addvolume")
	if onVMI {
		p = vmiPath(namespace, name, "addvolume")
	}
	return s.do(ctx, http.MethodPut, p, opts, nil)
}

// RemoveVolume unplugs a hotplugged volume, by its name or its claim's,
// from a VirtualMachine or, with onVMI, a VirtualMachineInstance.
func (s *Subresources) RemoveVolume(ctx context.Context, namespace, name string, onVMI bool, opts *v1.RemoveVolumeOptions) error {
	p := vmPath(namespace, name, "removevolume")
	if onVMI {
		p = vmiPath(namespace, name, "removevolume")
	}
	return s.do(ctx, http.MethodPut, p, opts, nil)
}

// addVolumeCommand is virtctl's addvolume: the VM's subresource, or the
// VMI's when no VM of that name exists.
func (c *cli) addVolumeCommand() *cobra.Command {
	var (
		volume, disk, serial, cache, diskType, bus string
		persist, dry                               bool
	)
	cmd := &cobra.Command{
		Use:   "addvolume VM|VMI",
		Short: "Add a volume to a running VM.",
		Long: "Hot-plugs a claim into a running virtual machine: the VM's template gets a hotpluggable volume and its disk, " +
			"and the running instance gets the disk without a restart (a VMI no VM owns gets it directly).",
		Example:           c.example("  # Add the claim 'data' to the VM 'myvm' as a SCSI disk:\n  %[1]s addvolume myvm --volume-name=data\n\n  # As a virtio disk named 'scratch':\n  %[1]s addvolume myvm --volume-name=data --disk-name=scratch --bus=virtio"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if volume == "" {
				return errors.New("--volume-name is required: the claim to add")
			}
			name := volume
			if disk != "" {
				name = disk
			}
			opts := &v1.AddVolumeOptions{
				Name:         name,
				Disk:         &v1.Disk{Serial: serial, Cache: v1.DriverCache(cache)},
				VolumeSource: &v1.HotplugVolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: volume}}},
				DryRun:       dryRun(cmd, dry),
			}
			if opts.Disk.Serial == "" {
				opts.Disk.Serial = name
			}
			switch opts.Disk.Cache {
			case "", v1.CacheNone, v1.CacheWriteThrough, v1.CacheWriteBack:
			default:
				return fmt.Errorf("error adding volume, invalid cache value %s", cache)
			}
			b := v1.DiskBus(bus)
			switch diskType {
			case "disk":
				if b != v1.DiskBusSCSI && b != v1.DiskBusVirtio {
					return virtctlError(fmt.Sprintf("Invalid bus type '%s' for disk. Only '%s' and '%s' are supported.", bus, v1.DiskBusSCSI, v1.DiskBusVirtio))
				}
				opts.Disk.Disk = &v1.DiskTarget{Bus: b}
			case "lun":
				if b != v1.DiskBusSCSI {
					return virtctlError(fmt.Sprintf("Invalid bus type '%s' for LUN disk. Only '%s' bus is supported.", bus, v1.DiskBusSCSI))
				}
				opts.Disk.LUN = &v1.LunTarget{Bus: b}
			default:
				return virtctlError(fmt.Sprintf("Invalid disk type '%s'. Only LUN and Disk are supported.", diskType))
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			err = s.AddVolume(contextOf(cmd), ns, args[0], false, opts)
			if apierrors.IsNotFound(err) {
				err = s.AddVolume(contextOf(cmd), ns, args[0], true, opts)
			}
			if err != nil {
				return fmt.Errorf("error adding volume, %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Successfully submitted add volume request to VM %s for volume %s\n", args[0], volume)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&volume, "volume-name", "", "name of the volume source, a PersistentVolumeClaim")
	f.StringVar(&disk, "disk-name", "", "name used in the disk/volume section of spec (default: the claim's)")
	f.StringVar(&serial, "serial", "", "serial number you want to assign to the disk (default: its name)")
	f.StringVar(&cache, "cache", "", "caching options attribute control the cache mechanism (none, writethrough, writeback)")
	f.BoolVar(&persist, "persist", false, "[deprecated] this flag has no effect: a VM's template always gets the volume")
	f.StringVar(&diskType, "disk-type", "disk", "specifies disk type to be hotplugged (disk/lun). Disk by default.")
	f.StringVar(&bus, "bus", string(v1.DiskBusSCSI), "specifies disk bus. scsi by default.")
	addDryRunFlag(cmd, &dry)
	return cmd
}

// removeVolumeCommand is virtctl's removevolume.
func (c *cli) removeVolumeCommand() *cobra.Command {
	var (
		volume       string
		persist, dry bool
	)
	cmd := &cobra.Command{
		Use:               "removevolume VM|VMI",
		Short:             "Remove a volume from a running VM.",
		Long:              "Unplugs a hotplugged volume (by its name or its claim's) from a running virtual machine without a restart.",
		Example:           c.example("  # Remove the volume 'data' from the VM 'myvm':\n  %[1]s removevolume myvm --volume-name=data"),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeNames(kindVM, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if volume == "" {
				return errors.New("--volume-name is required: the volume to remove")
			}
			s, ns, err := c.subresources()
			if err != nil {
				return err
			}
			opts := &v1.RemoveVolumeOptions{Name: volume, DryRun: dryRun(cmd, dry)}
			err = s.RemoveVolume(contextOf(cmd), ns, args[0], false, opts)
			if apierrors.IsNotFound(err) {
				err = s.RemoveVolume(contextOf(cmd), ns, args[0], true, opts)
			}
			if err != nil {
				return fmt.Errorf("error removing volume, %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Successfully submitted remove volume request to VM %s for volume %s\n", args[0], volume)
			return nil
		},
	}
	cmd.Flags().StringVar(&volume, "volume-name", "", "name used in volumes section of spec")
	cmd.Flags().BoolVar(&persist, "persist", false, "[deprecated] this flag has no effect: a VM's template always loses the volume")
	addDryRunFlag(cmd, &dry)
	return cmd
}

// virtctlError is one of virtctl's messages, as it spells them (scripts
// match them), capital letter and full stop included.
type virtctlError string

func (e virtctlError) Error() string { return string(e) }
