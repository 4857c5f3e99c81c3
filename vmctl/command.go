package vmctl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmctl/internal/containerdiskcmd"
)

// Options configure NewCommand. The zero value is a complete vmctl reading
// the kubeconfig, flags and standard streams of the process.
type Options struct {
	// Name is the name the program was invoked as (its os.Args[0]); the
	// default is os.Args[0]. A name starting with "kubectl-" makes vmctl a
	// kubectl plugin: kubectl-vmctl shows itself as "kubectl vmctl" in help
	// and examples (kubectl runs kubectl-vmctl for "kubectl vmctl ...").
	Name string
	// Streams are standard input, output and error; the process's by
	// default.
	Streams genericiooptions.IOStreams
	// ConfigFlags are kubectl's connection flags (--kubeconfig, --context,
	// -n/--namespace, -s/--server, --token, ...); NewCommand registers them
	// on the root command. Default: NewConfigFlags(), the same flags as
	// kubectl's; cli-runtime's *genericclioptions.ConfigFlags fits too.
	ConfigFlags ConfigFlags
	// KubeClient and VMClient, when set, are used instead of clients built
	// from ConfigFlags (expose creates Services with KubeClient; pause, expose
	// and completion read VMs and VMIs with VMClient).
	KubeClient kubernetes.Interface
	VMClient   versioned.Interface
	// Executable is the program ssh and scp run as their ProxyCommand
	// ("<Executable> port-forward --stdio=true ..."); default: this
	// program's path (os.Executable).
	Executable string
	// RunCommand runs ssh, scp, the VNC viewer and the browser of --web,
	// with the streams already set; default: (*exec.Cmd).Run.
	RunCommand func(*exec.Cmd) error
	// ClientVersion is what "version" reports for the client; default: from
	// the binary's build information.
	ClientVersion *VersionInfo
}

// ConfigFlags are command line flags saying which cluster to reach, as
// whom, and the namespace: kubectl's. cli-runtime's
// *genericclioptions.ConfigFlags implements it, as does NewConfigFlags.
type ConfigFlags interface {
	// AddFlags registers the flags.
	AddFlags(flags *pflag.FlagSet)
	// ToRESTConfig is the client configuration the kubeconfig and flags
	// give.
	ToRESTConfig() (*rest.Config, error)
	// ToRawKubeConfigLoader gives the namespace (-n, else the context's).
	ToRawKubeConfigLoader() clientcmd.ClientConfig
}

// NewConfigFlags returns kubectl's connection flags, cli-runtime's
// genericclioptions.ConfigFlags: --kubeconfig, --context, --cluster,
// --user, -n/--namespace, -s/--server, --token, --as, ... The KUBECONFIG
// variable and in-cluster configuration work as in kubectl.
func NewConfigFlags() ConfigFlags {
	return genericclioptions.NewConfigFlags(true)
}

// cli is what every command shares: the options with defaults filled in
// and the program's name for examples and messages.
type cli struct {
	opts  Options
	flags ConfigFlags
	// prog is how the user invokes vmctl: "vmctl" or "kubectl vmctl".
	prog string
}

// NewCommand returns vmctl's root command: KubeVirt's virtctl commands
// (start, stop, restart, migrate, expand, pause, unpause, soft-reboot,
// reset, guestosinfo, userlist, fslist, console, vnc, port-forward, ssh, scp,
// expose, version) on kubectl's connection flags, with shell completion
// ("completion bash|zsh|fish|powershell"), and "containerdisk push|build",
// which wraps a disk image file as a container disk image (package
// containerdisk) and pushes it to a registry or writes it to an archive.
// Execute it; errors are printed by cobra, prefixed "Error: ".
func NewCommand(opts Options) *cobra.Command {
	if opts.Name == "" && len(os.Args) > 0 {
		opts.Name = os.Args[0]
	}
	if opts.Streams.In == nil {
		opts.Streams.In = os.Stdin
	}
	if opts.Streams.Out == nil {
		opts.Streams.Out = os.Stdout
	}
	if opts.Streams.ErrOut == nil {
		opts.Streams.ErrOut = os.Stderr
	}
	if opts.ConfigFlags == nil {
		opts.ConfigFlags = NewConfigFlags()
	}
	if opts.RunCommand == nil {
		opts.RunCommand = (*exec.Cmd).Run
	}
	use, prog := ProgramName(opts.Name)
	c := &cli{opts: opts, flags: opts.ConfigFlags, prog: prog}

	root := &cobra.Command{
		Use:   use,
		Short: prog + " controls virtual machines on Kubernetes (KubeVirt's virtctl, for vmkit and KubeVirt).",
		Long: prog + ` controls virtual machines on Kubernetes: it starts, stops, restarts and migrates
VirtualMachines, pauses VirtualMachineInstances, queries their guest agent, and opens their
serial console, VNC display and ports, through KubeVirt's subresource API
(subresources.kubevirt.io/v1), which vmkit's and KubeVirt's virt-api serve.

It reads the cluster from kubeconfig like kubectl (--kubeconfig, --context, -n). Installed as
kubectl-vmctl on the PATH it is also a kubectl plugin: kubectl vmctl ...

"containerdisk push FILE IMAGE" brings your own disk: it wraps a qcow2 or raw disk image as a
container disk image, pushes it to a registry and prints the reference a VM's containerDisk.image
takes.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	if prog != use {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: prog}
	}
	root.SetIn(opts.Streams.In)
	root.SetOut(opts.Streams.Out)
	root.SetErr(opts.Streams.ErrOut)
	c.flags.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", c.completeNamespaces)

	root.AddCommand(
		c.startCommand(), c.stopCommand(), c.restartCommand(), c.migrateCommand(), c.expandCommand(),
		c.pauseCommand("pause"), c.pauseCommand("unpause"), c.softRebootCommand(), c.resetCommand(),
		c.guestQueryCommand("guestosinfo"), c.guestQueryCommand("userlist"), c.guestQueryCommand("fslist"),
		c.consoleCommand(), c.vncCommand(), c.portForwardCommand(), c.sshCommand(), c.scpCommand(),
		c.exposeCommand(), c.versionCommand(), containerdiskcmd.NewCommand(containerdiskcmd.Options{Example: c.example, UserAgent: "vmctl/" + ClientVersion().GitVersion}), c.timelineCommand(),
		c.addVolumeCommand(), c.removeVolumeCommand(),
	)
	return root
}

// ProgramName returns the command name (cobra's Use) and the name users
// type for the program invoked as argv0: "vmctl" for vmctl (or any other
// name), and for a kubectl plugin binary kubectl-<name> the binary's name
// and "kubectl <name>" (kubectl-vm_ctl is "kubectl vm-ctl", as kubectl maps
// plugin names).
func ProgramName(argv0 string) (use, display string) {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	if rest, ok := strings.CutPrefix(base, "kubectl-"); ok && rest != "" {
		words := strings.Split(rest, "-")
		for i, w := range words {
			words[i] = strings.ReplaceAll(w, "_", "-")
		}
		return base, "kubectl " + strings.Join(words, " ")
	}
	return "vmctl", "vmctl"
}

// namespace is the namespace of -n, else of the kubeconfig's context, else
// "default".
func (c *cli) namespace() (string, error) {
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	return ns, nil
}

func (c *cli) restConfig() (*rest.Config, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	return cfg, nil
}

// subresources returns the subresource API client and the namespace.
func (c *cli) subresources() (*Subresources, string, error) {
	ns, err := c.namespace()
	if err != nil {
		return nil, "", err
	}
	cfg, err := c.restConfig()
	if err != nil {
		return nil, "", err
	}
	s, err := NewSubresources(cfg)
	if err != nil {
		return nil, "", err
	}
	return s, ns, nil
}

func (c *cli) kubeClient() (kubernetes.Interface, error) {
	if c.opts.KubeClient != nil {
		return c.opts.KubeClient, nil
	}
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (c *cli) vmClient() (versioned.Interface, error) {
	if c.opts.VMClient != nil {
		return c.opts.VMClient, nil
	}
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(cfg)
}

// completeNamespaces completes -n with the cluster's namespaces.
func (c *cli) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	kube, err := c.kubeClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list, err := kube.CoreV1().Namespaces().List(contextOf(cmd), metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, toComplete) {
			out = append(out, ns.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// example formats a command's examples: each "%[1]s" is the program as
// the user types it.
func (c *cli) example(format string) string {
	return fmt.Sprintf(format, c.prog)
}

// dryRun is the dryRun field of a request: ["All"] when asked for, after
// telling the user, as virtctl does.
func dryRun(cmd *cobra.Command, on bool) []string {
	if !on {
		return nil
	}
	fmt.Fprintln(cmd.OutOrStdout(), "Dry Run execution")
	return []string{metav1.DryRunAll}
}

// contextOf is the command's context (Background when run with Execute).
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
