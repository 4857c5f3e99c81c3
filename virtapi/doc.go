// Package virtapi is virt-api: the aggregated API server behind the
// APIService v1.subresources.kubevirt.io, serving KubeVirt's subresource
// API with KubeVirt's paths and semantics, so KubeVirt's virtctl and
// vmkit's vmctl work unchanged.
//
// Under /apis/subresources.kubevirt.io/v1/namespaces/{namespace}/:
//
//	PUT virtualmachines/{name}/start      start (StartOptions: paused, dryRun)
//	PUT virtualmachines/{name}/stop       stop (StopOptions: gracePeriod, dryRun)
//	PUT virtualmachines/{name}/restart    restart (RestartOptions: gracePeriodSeconds 0 forces)
//	PUT virtualmachines/{name}/migrate    create a VirtualMachineInstanceMigration
//	GET virtualmachines/{name}/expand-spec the VM as its instance would run
//	PUT virtualmachines/{name}/addvolume, removevolume: 400, no hotplug yet
//	PUT virtualmachineinstances/{name}/pause, unpause, softreboot, reset, freeze, unfreeze
//	GET virtualmachineinstances/{name}/guestosinfo, userlist, filesystemlist
//	GET virtualmachineinstances/{name}/console, vnc, portforward/{port}[/{protocol}]
//	    WebSockets (subprotocol plain.kubevirt.io) proxied to the node agent
//	GET virtualmachineinstances/{name}/console/web/  the web console's page
//	    (package webconsole; authorized as the console; docs/console.md)
//
// and GET /apis/subresources.kubevirt.io/v1/version and .../healthz.
//
// Start, stop and restart do what KubeVirt's virt-api does for each run
// strategy: they change spec.runStrategy (start on Halted, stop on Always
// or Once) or record status.stateChangeRequests for the VM controller
// (Manual, RerunOnFailure, a paused start, a restart), with JSON patches
// that test what they replace, so two concurrent requests never both win.
// Invalid transitions answer 409 with KubeVirt's messages ("VM is already
// running", "Always does not support manual start requests", ...).
//
// Authentication and authorization are the cluster's: requests come
// through kube-apiserver's aggregation layer, whose front-proxy
// certificate and X-Remote-User headers k8s.io/apiserver's delegating
// authenticator verifies, and every request is authorized with a
// SubjectAccessReview against the subresource (update on
// virtualmachines/start, get on virtualmachineinstances/console, ...), so
// RBAC (kubevirt.io:view, kubevirt.io:edit, kubevirt.io:admin) decides who
// may do what. Discovery and health are served without authentication, as
// the aggregator's availability check needs them.
//
// Operations on a running guest (pause, reset, consoles, guest agent
// queries) are forwarded to the node agent of the VMI's node over TLS with
// virt-api's own client certificate (the installation's
// kubevirt-virt-handler-certs); users never see that certificate.
// Certificates are read from files when used, so the kubelet's update of a
// mounted Secret rotates them without a restart.
package virtapi
