package migration

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/kvconfig"
)

// KubeVirt's defaults of spec.configuration.migrations.
const (
	DefaultParallelMigrationsPerCluster      uint32 = 5
	DefaultParallelOutboundMigrationsPerNode uint32 = 2
	DefaultCompletionTimeoutPerGiB           int64  = 150
	DefaultProgressTimeout                   int64  = 150
	// DefaultBandwidthPerMigration is no limit.
	DefaultBandwidthPerMigration = "0Mi"
)

// ResolveConfiguration is the KubeVirt CR's migration configuration with
// KubeVirt's defaults filled in (cfg may be nil): what the controller hands
// the node agents in status.migrationState.migrationConfiguration and
// whose parallel limits it applies.
func ResolveConfiguration(cfg *v1.MigrationConfiguration) *v1.MigrationConfiguration {
	out := &v1.MigrationConfiguration{}
	if cfg != nil {
		out = cfg.DeepCopy()
	}
	u32 := func(p **uint32, def uint32) {
		if *p == nil {
			*p = &def
		}
	}
	i64 := func(p **int64, def int64) {
		if *p == nil {
			*p = &def
		}
	}
	b := func(p **bool) {
		if *p == nil {
			f := false
			*p = &f
		}
	}
	u32(&out.ParallelMigrationsPerCluster, DefaultParallelMigrationsPerCluster)
	u32(&out.ParallelOutboundMigrationsPerNode, DefaultParallelOutboundMigrationsPerNode)
	i64(&out.CompletionTimeoutPerGiB, DefaultCompletionTimeoutPerGiB)
	i64(&out.ProgressTimeout, DefaultProgressTimeout)
	if out.BandwidthPerMigration == nil {
		q := resource.MustParse(DefaultBandwidthPerMigration)
		out.BandwidthPerMigration = &q
	}
	b(&out.AllowAutoConverge)
	b(&out.AllowPostCopy)
	b(&out.UnsafeMigrationOverride)
	b(&out.DisableTLS)
	return out
}

// Configuration is the migration configuration of the KubeVirt CR in
// store (nil or empty: KubeVirt's defaults), resolved.
func Configuration(store cache.Store) *v1.MigrationConfiguration {
	if kv := kvconfig.Configuration(store); kv != nil {
		return ResolveConfiguration(kv.MigrationConfiguration)
	}
	return ResolveConfiguration(nil)
}

// EvictionStrategy is the VMI's eviction strategy: its own, else the
// KubeVirt CR's evictionStrategy (KubeVirt's VMIEvictionStrategy); nil when
// neither says.
func EvictionStrategy(vmi *v1.VirtualMachineInstance, store cache.Store) *v1.EvictionStrategy {
	if vmi.Spec.EvictionStrategy != nil {
		return vmi.Spec.EvictionStrategy
	}
	if kv := kvconfig.Configuration(store); kv != nil {
		return kv.EvictionStrategy
	}
	return nil
}

// IsMigratable reports whether the VMI's LiveMigratable condition is True.
func IsMigratable(vmi *v1.VirtualMachineInstance) bool {
	c := migratableCondition(vmi)
	return c != nil && c.Status == "True"
}

// MigratableOnEviction reports whether an eviction of the VMI's launcher
// should become a live migration: its eviction strategy is LiveMigrate, or
// LiveMigrateIfPossible and the VMI is migratable (KubeVirt's
// VMIMigratableOnEviction).
func MigratableOnEviction(vmi *v1.VirtualMachineInstance, store cache.Store) bool {
	s := EvictionStrategy(vmi, store)
	if s == nil {
		return false
	}
	switch *s {
	case v1.EvictionStrategyLiveMigrate:
		return true
	case v1.EvictionStrategyLiveMigrateIfPossible:
		return IsMigratable(vmi)
	}
	return false
}
