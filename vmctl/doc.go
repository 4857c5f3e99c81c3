// Package vmctl is vmkit's command line client, the equivalent of KubeVirt's
// virtctl, built on k8s.io/cli-runtime and cobra with kubectl's conventions,
// and the Go client of KubeVirt's subresource API it uses.
//
// # The command
//
// NewCommand returns the root command (cmd/vmctl only executes it). It
// takes kubectl's connection flags (--kubeconfig, --context, -n/--namespace,
// -s/--server, --token, ...; NewConfigFlags binds them with client-go's
// clientcmd, and cli-runtime's genericclioptions.ConfigFlags can be given
// instead) and has virtctl's commands with virtctl's flags:
//
//	start VM [--paused] [--dry-run]           PUT virtualmachines/{name}/start
//	stop VM [--force --grace-period=0]        PUT virtualmachines/{name}/stop
//	restart VM [--force --grace-period=0]     PUT virtualmachines/{name}/restart
//	migrate VM [--dry-run]                    PUT virtualmachines/{name}/migrate
//	expand --vm VM [-o yaml|json]             GET virtualmachines/{name}/expand-spec
//	pause|unpause vm|vmi NAME [--dry-run]     PUT virtualmachineinstances/{name}/pause|unpause
//	soft-reboot VMI                           PUT virtualmachineinstances/{name}/softreboot
//	reset VMI                                 PUT virtualmachineinstances/{name}/reset
//	guestosinfo|userlist|fslist VMI           GET virtualmachineinstances/{name}/guestosinfo|userlist|filesystemlist
//	console VMI [--timeout MIN]               the serial console (WebSocket), raw terminal, Ctrl+] ends
//	vnc VMI [--proxy-only] [--port N]         the VNC display on a local port ({"port":N} with --proxy-only)
//	console|vnc VMI --web [--port N]          virt-api's web console in a browser, through a local API proxy
//	port-forward TYPE/NAME[/NS] [udp/]L:R...  local ports to the guest's; --stdio=true for ssh's ProxyCommand
//	ssh [USER@]TYPE/NAME[/NS], scp SRC DST    the local ssh/scp through "port-forward --stdio=true"
//	expose vm|vmi NAME --name SVC [--port N]  a Service selecting the launcher pod
//	containerdisk push FILE IMAGE | build FILE -o X.tar  a disk image as a container disk
//	version [--client]                        client and server (GET /apis/subresources.kubevirt.io/v1/version)
//	completion bash|zsh|fish|powershell       shell completion, with VM and VMI names
//
// With --web, console and vnc serve what "kubectl proxy" serves (the API
// server, with the kubeconfig's credentials, on a local port) and open
// virt-api's web console page through it: its URL is
// http://127.0.0.1:PORT/apis/subresources.kubevirt.io/v1/namespaces/NS/virtualmachineinstances/NAME/console/web/,
// with the fragment #console or #vnc.
//
// A binary named kubectl-vmctl is a kubectl plugin ("kubectl vmctl start
// myvm"); its help and examples then say "kubectl vmctl" (ProgramName).
//
// # The client
//
// Subresources is the client of the subresource API
// (subresources.kubevirt.io/v1, served by virt-api through the Kubernetes
// API server's aggregation layer) built from a *rest.Config: Start, Stop,
// Restart, Migrate, ExpandSpec, Pause, Unpause, SoftReboot, Reset, Freeze,
// Unfreeze, GuestOSInfo, UserList, FileSystemList, Version, and Stream,
// which opens the console, VNC and port-forward WebSockets (subprotocol
// plain.kubevirt.io, binary messages of raw bytes) with the rest.Config's
// TLS settings and credentials and returns them as a net.Conn. The request
// bodies are vmapi/v1's StartOptions, StopOptions, RestartOptions,
// MigrateOptions, PauseOptions and UnpauseOptions, with KubeVirt's JSON
// names. Errors the server answers with are *apierrors.StatusError with the
// server's message and HTTP code.
package vmctl
