package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// DefaultStatsTimeout is how long a scrape of the agent's metrics waits for
// the launchers' domain statistics by default: launcher.CallTimeout, half
// of Prometheus's default scrape timeout.
const DefaultStatsTimeout = client.CallTimeout

// maxStatsCalls bounds the launchers asked for statistics at once (as
// KubeVirt's virt-handler bounds its scrapes of launcher sockets).
const maxStatsCalls = 10

// vmiLabels are the labels KubeVirt's virt-handler puts on every per-VMI
// metric: the VMI's node, namespace and name. (KubeVirt also adds a
// kubernetes_vmi_label_<key> label per label of the VMI; vmkit leaves them
// out so that every family has a fixed set of labels.)
var vmiLabels = []string{"node", "namespace", "name"}

// vmiFamily is one of KubeVirt's per-VMI metric families.
type vmiFamily struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

func newVMIFamily(name, help string, typ prometheus.ValueType, extra ...string) vmiFamily {
	return vmiFamily{prometheus.NewDesc(name, help, append(append([]string(nil), vmiLabels...), extra...), nil), typ}
}

// vmiStatsCollector collects KubeVirt's per-VMI metrics (kubevirt_vmi_*
// from libvirt's domain statistics) when Prometheus scrapes the agent: it
// asks the launcher of every Running VMI on the node for its domain's
// statistics (GET /v1/stats, see launcher.Client.Stats), up to
// maxStatsCalls at once, all within its timeout (the agent's
// StatsTimeout). A launcher that does not answer in time, or fails, is
// left out of that scrape and counted in
// vmkit_nodeagent_launcher_errors_total{op="stats"}: one hung launcher
// never stalls /metrics for longer than the timeout.
//
// It also exports vmkit_nodeagent_vmi_paused from the Paused condition of
// those VMIs, so that a guest an I/O error paused can be alerted on.
//
// Collecting at scrape time, from the launcher that owns the domain, is
// what KubeVirt does too (virt-handler asks each virt-launcher over its
// command socket): the values are fresh, the agent keeps no state per VMI,
// and the node agent needs no libvirt connection of its own.
type vmiStatsCollector struct {
	src            Source
	timeout        time.Duration
	launcherErrors *prometheus.CounterVec

	memResident, memAvailable, memUnused, memCached, memSwapIn, memSwapOut vmiFamily
	memMajorFaults, memMinorFaults, memBalloon, memUsable, memDomain       vmiFamily
	cpuUsage, cpuUser, cpuSystem                                           vmiFamily
	vcpuSeconds, vcpuWait, vcpuDelay                                       vmiFamily
	netRxBytes, netTxBytes, netRxPackets, netTxPackets                     vmiFamily
	netRxErrors, netTxErrors, netRxDropped, netTxDropped, netTraffic       vmiFamily
	diskReadReqs, diskWriteReqs, diskReadBytes, diskWriteBytes             vmiFamily
	diskReadTime, diskWriteTime, diskFlushReqs, diskFlushTime              vmiFamily

	// paused is vmkit's own, from the VMIs' Paused condition.
	paused vmiFamily
}

// newVMIStatsCollector defines the families with KubeVirt's names, types,
// units, labels and help texts. It asks src's launchers within timeout and
// counts their failures in launcherErrors.
func newVMIStatsCollector(src Source, timeout time.Duration, launcherErrors *prometheus.CounterVec) *vmiStatsCollector {
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	return &vmiStatsCollector{
		src:            src,
		timeout:        timeout,
		launcherErrors: launcherErrors,

		memResident:  newVMIFamily("kubevirt_vmi_memory_resident_bytes", "Resident set size of the process running the domain.", g),
		memAvailable: newVMIFamily("kubevirt_vmi_memory_available_bytes", "Amount of usable memory as seen by the domain. This value may not be accurate if a balloon driver is in use or if the guest OS does not initialize all assigned pages", g),
		memUnused:    newVMIFamily("kubevirt_vmi_memory_unused_bytes", "The amount of memory left completely unused by the system. Memory that is available but used for reclaimable caches should NOT be reported as free.", g),
		memCached:    newVMIFamily("kubevirt_vmi_memory_cached_bytes", "The amount of memory that is being used to cache I/O and is available to be reclaimed, corresponds to the sum of `Buffers` + `Cached` + `SwapCached` in `/proc/meminfo`.", g),
		memSwapIn:    newVMIFamily("kubevirt_vmi_memory_swap_in_traffic_bytes", "The total amount of data read from swap space of the guest in bytes.", g),
		memSwapOut:   newVMIFamily("kubevirt_vmi_memory_swap_out_traffic_bytes", "The total amount of memory written out to swap space of the guest in bytes.", g),
		memMajorFaults: newVMIFamily("kubevirt_vmi_memory_pgmajfault_total", "The number of page faults when disk IO was required. Page faults occur when a process makes a valid access to virtual memory that is not available. "+
			"When servicing the page fault, if disk IO is required, it is considered as major fault.", c),
		memMinorFaults: newVMIFamily("kubevirt_vmi_memory_pgminfault_total", "The number of other page faults, when disk IO was not required. Page faults occur when a process makes a valid access to virtual memory that is not available. "+
			"When servicing the page fault, if disk IO is NOT required, it is considered as minor fault.", c),
		memBalloon: newVMIFamily("kubevirt_vmi_memory_actual_balloon_bytes", "Current balloon size in bytes.", g),
		memUsable:  newVMIFamily("kubevirt_vmi_memory_usable_bytes", "The amount of memory which can be reclaimed by balloon without pushing the guest system to swap, corresponds to 'Available' in /proc/meminfo.", g),
		memDomain:  newVMIFamily("kubevirt_vmi_memory_domain_bytes", "The amount of memory in bytes allocated to the domain. The `memory` value in domain xml file.", g),

		cpuUsage:  newVMIFamily("kubevirt_vmi_cpu_usage_seconds_total", "Total CPU time spent in all modes (sum of both vcpu and hypervisor usage).", c),
		cpuUser:   newVMIFamily("kubevirt_vmi_cpu_user_usage_seconds_total", "Total CPU time spent in user mode.", c),
		cpuSystem: newVMIFamily("kubevirt_vmi_cpu_system_usage_seconds_total", "Total CPU time spent in system mode.", c),

		vcpuSeconds: newVMIFamily("kubevirt_vmi_vcpu_seconds_total", "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor time). "+
			"Where `id` is the vcpu identifier and `state` can be one of the following: [`OFFLINE`, `RUNNING`, `BLOCKED`].", c, "id", "state"),
		vcpuWait:  newVMIFamily("kubevirt_vmi_vcpu_wait_seconds_total", "Amount of time spent by each vcpu while waiting on I/O.", c, "id"),
		vcpuDelay: newVMIFamily("kubevirt_vmi_vcpu_delay_seconds_total", "Amount of time spent by each vcpu waiting in the queue instead of running.", c, "id"),

		netRxBytes:   newVMIFamily("kubevirt_vmi_network_receive_bytes_total", "Total network traffic received in bytes.", c, "interface"),
		netTxBytes:   newVMIFamily("kubevirt_vmi_network_transmit_bytes_total", "Total network traffic transmitted in bytes.", c, "interface"),
		netRxPackets: newVMIFamily("kubevirt_vmi_network_receive_packets_total", "Total network traffic received packets.", c, "interface"),
		netTxPackets: newVMIFamily("kubevirt_vmi_network_transmit_packets_total", "Total network traffic transmitted packets.", c, "interface"),
		netRxErrors:  newVMIFamily("kubevirt_vmi_network_receive_errors_total", "Total network received error packets.", c, "interface"),
		netTxErrors:  newVMIFamily("kubevirt_vmi_network_transmit_errors_total", "Total network transmitted error packets.", c, "interface"),
		netRxDropped: newVMIFamily("kubevirt_vmi_network_receive_packets_dropped_total", "The total number of rx packets dropped on vNIC interfaces.", c, "interface"),
		netTxDropped: newVMIFamily("kubevirt_vmi_network_transmit_packets_dropped_total", "The total number of tx packets dropped on vNIC interfaces.", c, "interface"),
		netTraffic:   newVMIFamily("kubevirt_vmi_network_traffic_bytes_total", "[Deprecated] Total number of bytes sent and received.", c, "interface", "type"),

		diskReadReqs:   newVMIFamily("kubevirt_vmi_storage_iops_read_total", "Total number of I/O read operations.", c, "drive"),
		diskWriteReqs:  newVMIFamily("kubevirt_vmi_storage_iops_write_total", "Total number of I/O write operations.", c, "drive"),
		diskReadBytes:  newVMIFamily("kubevirt_vmi_storage_read_traffic_bytes_total", "Total number of bytes read from storage.", c, "drive"),
		diskWriteBytes: newVMIFamily("kubevirt_vmi_storage_write_traffic_bytes_total", "Total number of written bytes.", c, "drive"),
		diskReadTime:   newVMIFamily("kubevirt_vmi_storage_read_times_seconds_total", "Total time spent on read operations.", c, "drive"),
		diskWriteTime:  newVMIFamily("kubevirt_vmi_storage_write_times_seconds_total", "Total time spent on write operations.", c, "drive"),
		diskFlushReqs:  newVMIFamily("kubevirt_vmi_storage_flush_requests_total", "Total storage flush requests.", c, "drive"),
		diskFlushTime:  newVMIFamily("kubevirt_vmi_storage_flush_times_seconds_total", "Total time spent on cache flushing.", c, "drive"),

		// KubeVirt has no metric for a paused VMI (its virt-controller's
		// kubevirt_vm_info shows a VM's printable status Paused, with no
		// reason).
		paused: newVMIFamily("vmkit_nodeagent_vmi_paused", "1 for each Running VMI on this node whose guest is paused (its Paused condition), by the condition's reason: "+
			"PausedByUser, or PausedIOError when QEMU stopped the guest on a disk I/O error (a full disk, lost storage) and it waits to be unpaused.", g, "reason"),
	}
}

func (c *vmiStatsCollector) families() []vmiFamily {
	return []vmiFamily{
		c.memResident, c.memAvailable, c.memUnused, c.memCached, c.memSwapIn, c.memSwapOut,
		c.memMajorFaults, c.memMinorFaults, c.memBalloon, c.memUsable, c.memDomain,
		c.cpuUsage, c.cpuUser, c.cpuSystem,
		c.vcpuSeconds, c.vcpuWait, c.vcpuDelay,
		c.netRxBytes, c.netTxBytes, c.netRxPackets, c.netTxPackets,
		c.netRxErrors, c.netTxErrors, c.netRxDropped, c.netTxDropped, c.netTraffic,
		c.diskReadReqs, c.diskWriteReqs, c.diskReadBytes, c.diskWriteBytes,
		c.diskReadTime, c.diskWriteTime, c.diskFlushReqs, c.diskFlushTime,
		c.paused,
	}
}

// Describe implements prometheus.Collector.
func (c *vmiStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families() {
		ch <- f.desc
	}
}

// vmiReport is one VMI's statistics, or why there are none.
type vmiReport struct {
	vmi   *v1.VirtualMachineInstance
	stats hypervisor.DomainStats
	err   error
}

// Collect implements prometheus.Collector.
func (c *vmiStatsCollector) Collect(ch chan<- prometheus.Metric) {
	vmis, err := c.src.CachedVMIs()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reports := make(chan vmiReport, len(vmis))
	slots := make(chan struct{}, maxStatsCalls)
	var wg sync.WaitGroup
	for _, vmi := range vmis {
		if !c.scraped(vmi) {
			continue
		}
		if reason := pausedBy(&vmi.Status); reason != "" {
			ch <- prometheus.MustNewConstMetric(c.paused.desc, c.paused.typ, 1, vmi.Status.NodeName, vmi.Namespace, vmi.Name, reason)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				reports <- vmiReport{vmi: vmi, err: ctx.Err()}
				return
			}
			st, err := c.src.Launcher(vmi.UID).Stats(ctx)
			reports <- vmiReport{vmi: vmi, stats: st, err: err}
		}()
	}
	go func() { wg.Wait(); close(reports) }()
	for r := range reports {
		if r.err != nil {
			var le *client.Error
			if !errors.As(r.err, &le) || le.Code != http.StatusConflict { // a domain that just ended is no failure
				c.launcherErrors.WithLabelValues("stats").Inc()
				klog.V(3).InfoS("no domain statistics for this scrape", "vmi", klog.KObj(r.vmi), "err", r.err)
			}
			continue
		}
		c.emit(ch, r.vmi, &r.stats)
	}
}

// scraped reports whether the VMI's domain has statistics to ask for: it
// runs (or is paused, which is the Running phase too) on this node.
func (c *vmiStatsCollector) scraped(vmi *v1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == v1.Running && vmi.Status.NodeName == c.src.NodeName()
}

const (
	nanoseconds = 1e-9
	unit        = 1
)

// emit sends the metrics of one VMI's statistics: only the values the
// hypervisor reported.
func (c *vmiStatsCollector) emit(ch chan<- prometheus.Metric, vmi *v1.VirtualMachineInstance, st *hypervisor.DomainStats) {
	base := []string{vmi.Status.NodeName, vmi.Namespace, vmi.Name}
	send := func(f vmiFamily, v *uint64, scale float64, extra ...string) {
		if v == nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(f.desc, f.typ, float64(*v)*scale, append(append([]string(nil), base...), extra...)...)
	}
	m := &st.Memory
	send(c.memResident, m.ResidentBytes, unit)
	send(c.memAvailable, m.AvailableBytes, unit)
	send(c.memUnused, m.UnusedBytes, unit)
	send(c.memCached, m.CachedBytes, unit)
	send(c.memSwapIn, m.SwapInBytes, unit)
	send(c.memSwapOut, m.SwapOutBytes, unit)
	send(c.memMajorFaults, m.MajorFaults, unit)
	send(c.memMinorFaults, m.MinorFaults, unit)
	send(c.memBalloon, m.ActualBalloonBytes, unit)
	send(c.memUsable, m.UsableBytes, unit)
	send(c.memDomain, m.DomainBytes, unit)

	send(c.cpuUsage, st.CPU.TimeNs, nanoseconds)
	send(c.cpuUser, st.CPU.UserNs, nanoseconds)
	send(c.cpuSystem, st.CPU.SystemNs, nanoseconds)

	for _, vc := range st.VCPUs {
		id := strconv.Itoa(vc.ID)
		send(c.vcpuSeconds, vc.TimeNs, nanoseconds, id, string(vc.State))
		send(c.vcpuWait, vc.WaitNs, nanoseconds, id)
		send(c.vcpuDelay, vc.DelayNs, nanoseconds, id)
	}
	for _, n := range st.Interfaces {
		iface := n.Alias
		if iface == "" {
			iface = n.Name
		}
		send(c.netRxBytes, n.RxBytes, unit, iface)
		send(c.netTxBytes, n.TxBytes, unit, iface)
		send(c.netRxPackets, n.RxPackets, unit, iface)
		send(c.netTxPackets, n.TxPackets, unit, iface)
		send(c.netRxErrors, n.RxErrors, unit, iface)
		send(c.netTxErrors, n.TxErrors, unit, iface)
		send(c.netRxDropped, n.RxDrops, unit, iface)
		send(c.netTxDropped, n.TxDrops, unit, iface)
		send(c.netTraffic, n.RxBytes, unit, iface, "rx")
		send(c.netTraffic, n.TxBytes, unit, iface, "tx")
	}
	for _, d := range st.Disks {
		drive := d.Alias
		if drive == "" {
			drive = d.Name
		}
		send(c.diskReadReqs, d.ReadRequests, unit, drive)
		send(c.diskWriteReqs, d.WriteRequests, unit, drive)
		send(c.diskReadBytes, d.ReadBytes, unit, drive)
		send(c.diskWriteBytes, d.WriteBytes, unit, drive)
		send(c.diskReadTime, d.ReadTimeNs, nanoseconds, drive)
		send(c.diskWriteTime, d.WriteTimeNs, nanoseconds, drive)
		send(c.diskFlushReqs, d.FlushRequests, unit, drive)
		send(c.diskFlushTime, d.FlushTimeNs, nanoseconds, drive)
	}
}

// pausedBy is the reason of a status's Paused condition when it is True
// (as the agent's status reads it).
func pausedBy(s *v1.VirtualMachineInstanceStatus) string {
	for _, c := range s.Conditions {
		if c.Type == v1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

var _ prometheus.Collector = (*vmiStatsCollector)(nil)
