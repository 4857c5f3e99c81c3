# vmkit: the two commands are `make demo` and `make test`.
# Everything a target needs is installed by the target itself (idempotent,
# cached under _output/), so both work on a fresh Debian 12 machine.

SHELL := /bin/bash
ROOT := $(CURDIR)
OUT := $(ROOT)/_output
GO_TEST_FLAGS ?= -count=1 -timeout 30m

export KUBEBUILDER_ASSETS ?= $(OUT)/k8s-bin
export VMKIT_GUEST_DIR ?= $(OUT)/guest
# Every go command here builds with -trimpath and Go's default CGO_ENABLED (1 with gcc), as
# hack/setup-k8s.sh builds Kubernetes and hack/build-images.sh builds virt-launcher: go's build
# cache then compiles k8s.io/api, apimachinery, client-go, apiserver and the rest once for the
# Kubernetes binaries, the launcher, go vet and every test binary, not once per set of flags.
export GOFLAGS += -trimpath

.PHONY: all test test-deps unit generate verify lint apidiff bench demo demo-down demo-local density clean

all: test

## test: install what the tests need, check generated code, run every test with lint beside
## them at the lowest CPU priority (hack/test.sh says in what order, and why).
test: test-deps verify
	GO_TEST_FLAGS='$(GO_TEST_FLAGS)' hack/test.sh

## test-deps: containerd + runc, libvirt + QEMU, the tiny test guest, Kubernetes + etcd from
## source with the Debian cloud guest built beside them, vmkit's images (for the end-to-end tests
## on a real kubelet), the code tools (hack/test-deps.sh).
test-deps:
	hack/test-deps.sh

## unit: only the tests that need nothing installed.
unit:
	go test -count=1 -short ./...

## generate: regenerate deepcopy, clientset, listers, informers and CRDs.
generate:
	hack/update-codegen.sh

## verify: fail when generated code is not what `make generate` produces.
verify:
	hack/verify-codegen.sh

## lint: gofmt, go vet, staticcheck and `make apidiff`.
lint:
	hack/lint.sh

## apidiff: the Go SDK's API against the last release's (hack/api/vX.Y.Z.export), apidiff's
## report printed; fails on an incompatible change not in hack/api/accepted.txt. A release runs
## hack/apidiff.sh -baseline vX.Y.Z (docs/api-compatibility.md).
apidiff:
	hack/apidiff.sh

## bench: every Go benchmark, with allocations.
bench:
	go test -run='^$$' -bench=. -benchmem ./...

## demo: a real single-node cluster (kubelet + containerd), vmkit installed by its operator,
## examples/vm-tiny.yaml booted and its console shown; the cluster keeps running. Needs root.
## DEMO_NODES=2 runs two nodes (localhost and localhost-2, each its own containerd and kubelet).
DEMO_NODES ?= 1
demo:
	DEMO_NODES=$(DEMO_NODES) hack/demo.sh

## demo-down: stop the cluster `make demo` left running.
demo-down:
	@if [ -x $(OUT)/bin/cluster ]; then $(OUT)/bin/cluster down; else go run ./hack/cluster down; fi

## demo-local: the same VM without a kubelet: controllers, node agent and a kubelet stand-in
## (nodeagent/localnode) running virt-launcher processes on the node's libvirt; stops at the end.
demo-local:
	hack/demo-local.sh

## release: build the images for linux/amd64 and linux/arm64, push them to REGISTRY as
## multi-architecture indexes tagged VERSION, and write the release manifests
## (kubevirt-operator.yaml, kubevirt-cr.yaml) into _output/release/VERSION (hack/release.sh,
## docs/install.md). make release REGISTRY=registry.example.com/vmkit VERSION=v0.1.0
release:
	REGISTRY='$(REGISTRY)' VERSION='$(VERSION)' hack/release.sh

## clean: remove built binaries and caches under _output (keeps nothing running).
clean:
	rm -rf $(OUT)

## density: the controller density benchmark (real API server + scheduler, KWOK nodes).
## DENSITY_VMS and DENSITY_NODES choose the size (default 1000 VMs on 100 nodes);
## DENSITY_VMIRS=1 creates one VirtualMachineInstanceReplicaSet of DENSITY_VMS replicas instead.
DENSITY_VMS ?= 1000
DENSITY_NODES ?= 100
density: test-deps
	[ -x $(OUT)/bin/kwok ] || GOBIN=$(OUT)/bin go install sigs.k8s.io/kwok/cmd/kwok@v0.7.0
	go run ./hack/density -vms $(DENSITY_VMS) -nodes $(DENSITY_NODES) $(if $(DENSITY_VMIRS),-vmirs)
