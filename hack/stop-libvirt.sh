#!/usr/bin/env bash
# Stop the libvirtd and virtlogd daemons started by hack/setup-libvirt.sh,
# found through their pid files. Running domains are destroyed first so no
# QEMU process is orphaned. Safe to run when nothing is running.
set -euo pipefail

URI=${VMKIT_LIBVIRT_URI:-qemu:///system}

running() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

if running /run/libvirtd.pid; then
  while read -r dom; do
    [ -n "$dom" ] || continue
    echo "stop-libvirt: destroying domain $dom"
    virsh -q -c "$URI" destroy "$dom" >/dev/null 2>&1 || true
  done < <(timeout 10 virsh -q -c "$URI" list --name 2>/dev/null || true)
fi

for daemon in libvirtd virtlogd; do
  pidfile=/run/$daemon.pid
  running "$pidfile" || continue
  pid=$(cat "$pidfile")
  echo "stop-libvirt: stopping $daemon (pid $pid)"
  kill "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "stop-libvirt: $daemon (pid $pid) still running after 10 s" >&2
    exit 1
  fi
  rm -f "$pidfile"
done
