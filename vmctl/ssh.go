package vmctl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sshFlags are ssh's and scp's flags, virtctl's names.
type sshFlags struct {
	username     string
	identityFile string
	knownHosts   string
	port         int
	localOptions []string
}

func (f *sshFlags) add(flags *pflag.FlagSet) {
	flags.StringVarP(&f.username, "username", "l", "", "The user to log in as; the user before '@' in the target wins; ssh's default when neither is given.")
	flags.StringVarP(&f.identityFile, "identity-file", "i", "", "The private key to authenticate with; ssh's keys and agent when not given.")
	flags.StringVar(&f.knownHosts, "known-hosts", "", "The known_hosts file to use instead of ssh's.")
	flags.IntVarP(&f.port, "port", "p", 22, "The port on the VM to send SSH traffic to.")
	flags.StringArrayVarP(&f.localOptions, "local-ssh-opts", "t", nil, `Additional options for the local ssh client, such as "-o StrictHostKeyChecking=no"; repeatable.`)
}

// sshTarget is a parsed [user@]TYPE/NAME[/NAMESPACE].
type sshTarget struct {
	Target
	User string
}

func parseSSHTarget(arg string) (sshTarget, error) {
	var t sshTarget
	if user, rest, ok := strings.Cut(arg, "@"); ok {
		if user == "" {
			return sshTarget{}, errors.New("expected a user name before '@'")
		}
		t.User, arg = user, rest
	}
	if arg == "" {
		return sshTarget{}, errors.New("expected a target after '@'")
	}
	var err error
	t.Target, err = ParseTarget(arg)
	return t, err
}

// localClient returns the ssh or scp command reaching target through
// "<self> port-forward --stdio=true" as its ProxyCommand, with the user's
// options before operands.
func (c *cli) localClient(cmd *cobra.Command, program string, f *sshFlags, t Target, namespace string, operands []string) (*exec.Cmd, error) {
	self := c.opts.Executable
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding this program's path for ssh's ProxyCommand: %w", err)
		}
	}
	proxy := []string{self}
	proxy = append(proxy, connectionFlags(cmd)...)
	proxy = append(proxy, "port-forward", "--stdio=true", t.Kind+"/"+t.Name+"/"+namespace, strconv.Itoa(f.port))
	args := []string{"-o", "ProxyCommand=" + shellJoin(proxy)}
	if f.knownHosts != "" {
		args = append(args, "-o", "UserKnownHostsFile="+f.knownHosts)
	}
	for _, o := range f.localOptions {
		// "-o StrictHostKeyChecking=no" is two arguments to ssh.
		args = append(args, strings.Fields(o)...)
	}
	if f.identityFile != "" {
		args = append(args, "-i", f.identityFile)
	}
	args = append(args, operands...)
	run := exec.Command(program, args...)
	run.Stdin, run.Stdout, run.Stderr = c.opts.Streams.In, cmd.OutOrStdout(), cmd.ErrOrStderr()
	return run, nil
}

// sshHost is the host name ssh sees (and records in known_hosts):
// kind.name.namespace, as virtctl writes it.
func sshHost(user string, t Target, namespace string) string {
	host := t.Kind + "." + t.Name + "." + namespace
	if user != "" {
		return user + "@" + host
	}
	return host
}

// connectionFlags are the kubectl connection flags the user gave (but the
// namespace, which the target carries), for the ProxyCommand to reach the
// same cluster as the user.
func connectionFlags(cmd *cobra.Command) []string {
	var out []string
	cmd.Root().PersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if !fl.Changed || fl.Name == "namespace" {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	return out
}

// shellJoin quotes words for the shell ssh runs ProxyCommand with.
func shellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (c *cli) sshCommand() *cobra.Command {
	var f sshFlags
	var command string
	cmd := &cobra.Command{
		Use:   "ssh [USER@]TYPE/NAME[/NAMESPACE] [-- COMMAND...]",
		Short: "Open a SSH connection to a virtual machine instance.",
		Long: `Runs the local ssh client against a virtual machine or virtual machine instance, through the
Kubernetes API server: ssh's ProxyCommand is "port-forward --stdio=true" of this program, so no
Service or node access is needed. TYPE is vmi or vm.`,
		Example: c.example(`  # Connect to 'testvmi' as jdoe:
  %[1]s ssh jdoe@vmi/testvmi

  # Connect to 'testvm' in namespace 'mynamespace' with a key:
  %[1]s ssh -i ~/.ssh/id_ed25519 jdoe@vm/testvm/mynamespace

  # Run a command:
  %[1]s ssh jdoe@vmi/testvmi -c 'uname -a'`),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseSSHTarget(args[0])
			if err != nil {
				return err
			}
			ns := t.Namespace
			if ns == "" {
				if ns, err = c.namespace(); err != nil {
					return err
				}
			}
			user := t.User
			if user == "" {
				user = f.username
			}
			operands := []string{sshHost(user, t.Target, ns)}
			if command != "" {
				operands = append(operands, command)
			}
			operands = append(operands, args[1:]...)
			run, err := c.localClient(cmd, "ssh", &f, t.Target, ns, operands)
			if err != nil {
				return err
			}
			return c.opts.RunCommand(run)
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().StringVarP(&command, "command", "c", "", "A command to run in the VM.")
	return cmd
}

// scpOperand is a parsed scp argument: a local path, or
// [USER@]TYPE/NAME[/NAMESPACE]:PATH.
type scpOperand struct {
	remote bool
	target sshTarget
	path   string
}

func parseSCPOperand(arg string) scpOperand {
	if before, path, ok := strings.Cut(arg, ":"); ok {
		if t, err := parseSSHTarget(before); err == nil {
			return scpOperand{remote: true, target: t, path: path}
		}
	}
	return scpOperand{path: arg}
}

func (c *cli) scpCommand() *cobra.Command {
	var f sshFlags
	var recursive, preserve bool
	cmd := &cobra.Command{
		Use:   "scp SOURCE DESTINATION",
		Short: "SCP files from/to a virtual machine instance.",
		Long: `Runs the local scp client to copy files from or to a virtual machine or virtual machine
instance, through the Kubernetes API server (see ssh). One of SOURCE and DESTINATION is
[USER@]TYPE/NAME[/NAMESPACE]:PATH, the other a local path.`,
		Example: c.example(`  # Copy a file to the home directory of jdoe in 'testvmi':
  %[1]s scp myfile.bin jdoe@vmi/testvmi:myfile.bin

  # Copy a directory to 'testvm' in namespace 'mynamespace':
  %[1]s scp -r ~/mydir/ jdoe@vm/testvm/mynamespace:./mydir

  # Copy a file from the VM:
  %[1]s scp jdoe@vmi/testvmi:myfile.bin ~/myfile.bin`),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseSCPOperand(args[0]), parseSCPOperand(args[1])
			if src.remote == dst.remote {
				return errors.New("exactly one of SOURCE and DESTINATION must be remote: [USER@]TYPE/NAME[/NAMESPACE]:PATH")
			}
			remote := src
			if dst.remote {
				remote = dst
			}
			ns := remote.target.Namespace
			if ns == "" {
				var err error
				if ns, err = c.namespace(); err != nil {
					return err
				}
			}
			user := remote.target.User
			if user == "" {
				user = f.username
			}
			remoteArg := sshHost(user, remote.target.Target, ns) + ":" + remote.path
			var operands []string
			if recursive {
				operands = append(operands, "-r")
			}
			if preserve {
				operands = append(operands, "-p")
			}
			if src.remote {
				operands = append(operands, remoteArg, dst.path)
			} else {
				operands = append(operands, src.path, remoteArg)
			}
			run, err := c.localClient(cmd, "scp", &f, remote.target.Target, ns, operands)
			if err != nil {
				return err
			}
			return c.opts.RunCommand(run)
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "Recursively copy entire directories.")
	cmd.Flags().BoolVar(&preserve, "preserve", false, "Preserve modification times, access times, and modes from the original file.")
	return cmd
}
