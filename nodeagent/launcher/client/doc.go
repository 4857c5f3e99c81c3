// Package client is the node agent's side of a virt-launcher's command
// socket (<ShareDir>/sockets/<VMI UID>/launcher.sock, see SocketPath): the
// Client that sends the launcher its commands, the types both sides
// exchange (Status, MigrateRequest, NetworkInterface, ProbeResult, ...),
// where a launcher's socket and final status are (SocketDir, ReadFinal,
// Location) and the helpers the node agent decides with (HotplugPending,
// ExpandPending). The launcher itself, which serves the socket, is package
// nodeagent/launcher; this package does not depend on it, so the node agent
// links only the client.
//
// The command socket protocol is HTTP/1.1 over the UNIX socket, with JSON bodies:
//
//	GET /v1/ping                 {"uid": ...}
//	GET /v1/state                Status
//	PUT /v1/network              body: []NetworkInterface (before sync); Status
//	PUT /v1/sync                 body: the VMI; Status
//	PUT /v1/{shutdown,kill,pause,unpause,reset}   Status
//	PUT /v1/softreboot           body: SoftRebootRequest; Status
//	PUT /v1/freeze               body: v1.FreezeUnfreezeTimeout (optional); Status
//	PUT /v1/unfreeze             Status
//	GET /v1/stats                hypervisor.DomainStats of the started domain
//	GET /v1/guest-agent/{command}  the QEMU guest agent's return value
//	    (see IsGuestAgentCommand)
//	GET /v1/probe/{readiness,liveness}[?timeoutSeconds=N]  ProbeResult of
//	    the VMI's probe through the guest agent (see launcher.Launcher.Probe)
//	GET /v1/console[?history=true], GET /v1/vnc
//	    with "Connection: Upgrade" and "Upgrade: vmkit-stream": 101, then
//	    the raw byte stream both ways.
//	PUT /v1/migration/target     body: the VMI; MigrationTargetInfo
//	GET /v1/migration/info       MigrationTargetInfo
//	PUT /v1/migrate              body: MigrateRequest; Status
//	PUT /v1/migration/abort      Status
//
// The calls that wait for the QEMU guest agent (softreboot through it,
// freeze, unfreeze, guest-agent) answer 409 with reason AgentUnavailable
// when no agent answers.
//
// Errors are {"error": "...", "status": Status} with 400 (bad request),
// 409 (not in a state that allows it, or the domain ended) or 500.
package client
