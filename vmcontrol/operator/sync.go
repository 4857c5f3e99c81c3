package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/installstrategy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

// Reasons of the conditions and events the controller reports.
const (
	ReasonMultipleKubeVirts  = "MultipleKubeVirts"
	ReasonInvalidConfig      = "InvalidConfig"
	ReasonStrategyPending    = "StrategyPending"
	ReasonStrategyFailed     = "StrategyLoadFailed"
	ReasonDeploying          = "Deploying"
	ReasonUpdating           = "Updating"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonAllResourcesSynced = "AllResourcesSynced"
	ReasonAllComponentsReady = "AllComponentsReady"
	ReasonComponentsNotReady = "ComponentsNotReady"
	ReasonReadinessUnknown   = "ReadinessUnknown"
	ReasonDeleting           = "Deleting"
	ReasonWorkloadsExist     = "WorkloadsExist"
	ReasonDeleteFailed       = "DeleteFailed"
	// ReasonImagePullFailed: a component's image cannot be pulled (a wrong
	// registry, tag or digest, or missing pull credentials); Degraded
	// names the image and what the kubelet said.
	ReasonImagePullFailed = "ImagePullFailed"
)

// pendingRetry is how soon a pending strategy or deletion is looked at again.
const pendingRetry = 2 * time.Second

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.kvLister.KubeVirts(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.stale.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if c.stale.Stale(key, cached.ResourceVersion) {
		return nil // our own write has not reached the cache; its event brings us back
	}
	all, err := c.kvLister.List(labels.Everything())
	if err != nil {
		return err
	}
	kv := cached.DeepCopy()
	if active := activeKubeVirt(all); active == nil || active.UID != kv.UID {
		return c.refuse(ctx, key, kv, active)
	}
	if kv.DeletionTimestamp != nil {
		return c.uninstall(ctx, key, kv)
	}
	if !hasFinalizer(kv) {
		kv.Finalizers = append(kv.Finalizers, v1.KubeVirtFinalizer)
		updated, err := c.client.KubevirtV1().KubeVirts(ns).Update(ctx, kv, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("KubeVirt %s: adding finalizer: %w", key, err)
		}
		c.stale.Wrote(key, cached.ResourceVersion)
		kv = updated
	}
	return c.install(ctx, key, kv)
}

// refuse marks a CR that is not the honoured one.
func (c *Controller) refuse(ctx context.Context, key string, kv, active *v1.KubeVirt) error {
	if kv.DeletionTimestamp != nil {
		return nil // not ours to hold
	}
	other := "another KubeVirt"
	if active != nil {
		other = "KubeVirt " + active.Namespace + "/" + active.Name
	}
	status := kv.Status.DeepCopy()
	setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonMultipleKubeVirts,
		fmt.Sprintf("%s already manages the installation; only one KubeVirt is honoured and this one is ignored", other), c.now())
	return c.writeStatus(ctx, key, kv, status)
}

// install applies the target strategy and reports progress.
func (c *Controller) install(ctx context.Context, key string, kv *v1.KubeVirt) error {
	log := klog.FromContext(ctx).WithValues("kubevirt", key)
	now := c.now()
	status := kv.Status.DeepCopy()
	status.OperatorVersion = c.operator.Version
	status.ObservedGeneration = &kv.Generation
	target, err := installstrategy.ConfigForKubeVirt(c.operator, kv)
	if err != nil {
		setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonInvalidConfig, err.Error(), now)
		setCondition(status, v1.KubeVirtConditionDegraded, corev1.ConditionTrue, ReasonInvalidConfig, err.Error(), now)
		return c.writeStatus(ctx, key, kv, status) // a spec change brings us back
	}
	status.TargetKubeVirtVersion = target.Version
	status.TargetKubeVirtRegistry = target.Registry
	status.TargetDeploymentID = target.ID
	status.TargetDeploymentConfig = target.JSON()
	if status.ObservedDeploymentID != target.ID {
		reason := ReasonDeploying
		if status.ObservedDeploymentID != "" {
			reason = ReasonUpdating
		}
		if status.Phase != v1.KubeVirtPhaseDeploying {
			log.Info("deploying", "version", target.Version, "registry", target.Registry, "id", target.ID)
			c.recorder.Eventf(kv, corev1.EventTypeNormal, reason, "Deploying version %s from %s (config %s)", target.Version, target.Registry, target.ID)
		}
		status.Phase = v1.KubeVirtPhaseDeploying
		msg := fmt.Sprintf("Deploying version %s from %s", target.Version, target.Registry)
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionTrue, reason, msg, now)
		setCondition(status, v1.KubeVirtConditionAvailable, corev1.ConditionFalse, reason, msg, now)
		// Record Deploying before the (long) apply, so the transition is visible.
		if kv, err = c.writeStatusReturn(ctx, key, kv, status); err != nil {
			return err
		}
		status = kv.Status.DeepCopy()
	}
	strategy, err := c.strategy(ctx, target)
	if errors.Is(err, ErrStrategyPending) {
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionTrue, ReasonStrategyPending, err.Error(), now)
		if err := c.writeStatus(ctx, key, kv, status); err != nil {
			return err
		}
		return reconcile.After(pendingRetry)
	}
	if err != nil {
		setCondition(status, v1.KubeVirtConditionDegraded, corev1.ConditionTrue, ReasonStrategyFailed, err.Error(), now)
		setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonStrategyFailed, err.Error(), now)
		if werr := c.writeStatus(ctx, key, kv, status); werr != nil {
			return werr
		}
		return fmt.Errorf("KubeVirt %s: loading strategy %s: %w", key, target.ID, err)
	}
	// The certificates first: the workloads mount them, and the
	// APIService carries their CA, which the pure strategy cannot hold.
	certs, err := installstrategy.EnsureCertificates(ctx, c.dynamic, target.Namespace)
	if err == nil {
		var res installstrategy.Result
		res, err = installstrategy.Apply(ctx, c.dynamic, strategy, installstrategy.ApplyOptions{CABundle: certs.CABundle, Monitoring: c.monitoringServed(ctx)})
		if res.Writes()+certs.Writes > 0 {
			log.V(2).Info("applied strategy", "created", len(res.Created), "updated", len(res.Updated), "pruned", len(res.Deleted), "certificates", certs.Writes)
		}
	}
	if err != nil {
		c.recorder.Event(kv, corev1.EventTypeWarning, ReasonApplyFailed, err.Error())
		setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonApplyFailed, err.Error(), now)
		setCondition(status, v1.KubeVirtConditionDegraded, corev1.ConditionTrue, ReasonApplyFailed, err.Error(), now)
		if werr := c.writeStatus(ctx, key, kv, status); werr != nil {
			return werr
		}
		return fmt.Errorf("KubeVirt %s: %w", key, err)
	}
	if status.Phase != v1.KubeVirtPhaseDeployed {
		c.recorder.Eventf(kv, corev1.EventTypeNormal, "Deployed", "Deployed version %s from %s", target.Version, target.Registry)
	}
	status.Phase = v1.KubeVirtPhaseDeployed
	status.ObservedKubeVirtVersion = target.Version
	status.ObservedKubeVirtRegistry = target.Registry
	status.ObservedDeploymentID = target.ID
	status.ObservedDeploymentConfig = target.JSON()
	all := fmt.Sprintf("All %d objects of version %s are installed", len(strategy.Objects()), target.Version)
	setCondition(status, v1.KubeVirtConditionCreated, corev1.ConditionTrue, ReasonAllResourcesSynced, all, now)
	setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionTrue, ReasonAllResourcesSynced, all, now)
	setCondition(status, v1.KubeVirtConditionDegraded, corev1.ConditionFalse, ReasonAllResourcesSynced, all, now)
	switch known, ready, waiting := c.readiness(strategy); {
	case !known:
		setCondition(status, v1.KubeVirtConditionAvailable, corev1.ConditionUnknown, ReasonReadinessUnknown, "The operator does not watch the components' workloads", now)
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionFalse, ReasonAllResourcesSynced, all, now)
	case ready:
		setCondition(status, v1.KubeVirtConditionAvailable, corev1.ConditionTrue, ReasonAllComponentsReady, "All components are rolled out and available", now)
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionFalse, ReasonAllComponentsReady, "All components are rolled out and available", now)
	default:
		msg := "Waiting for " + strings.Join(waiting, ", ")
		setCondition(status, v1.KubeVirtConditionAvailable, corev1.ConditionFalse, ReasonComponentsNotReady, msg, now)
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionTrue, ReasonComponentsNotReady, msg, now)
		if failures := c.pullFailures(strategy); len(failures) > 0 {
			msg := strings.Join(failures, "; ")
			if prev := condition(kv.Status, v1.KubeVirtConditionDegraded); prev == nil || prev.Reason != ReasonImagePullFailed || prev.Message != msg {
				c.recorder.Event(kv, corev1.EventTypeWarning, ReasonImagePullFailed, msg)
			}
			setCondition(status, v1.KubeVirtConditionDegraded, corev1.ConditionTrue, ReasonImagePullFailed, msg, now)
		}
	}
	if err := c.writeStatus(ctx, key, kv, status); err != nil {
		return err
	}
	return reconcile.After(c.resync)
}

// monitoringServed reports whether the cluster serves the Prometheus
// Operator's kinds. A failed discovery is logged and counts as not served:
// monitoring is optional, the installation is not.
func (c *Controller) monitoringServed(ctx context.Context) bool {
	if c.discovery == nil {
		return false
	}
	served, err := installstrategy.MonitoringServed(c.discovery)
	if err != nil {
		klog.FromContext(ctx).Error(err, "cannot tell whether the Prometheus Operator's kinds are served; its objects are not applied this time")
	}
	return served
}

// uninstall removes what the CR installed, then its finalizer.
func (c *Controller) uninstall(ctx context.Context, key string, kv *v1.KubeVirt) error {
	if !hasFinalizer(kv) {
		return nil
	}
	now := c.now()
	status := kv.Status.DeepCopy()
	if status.Phase != v1.KubeVirtPhaseDeleting && status.Phase != v1.KubeVirtPhaseDeleted {
		c.recorder.Event(kv, corev1.EventTypeNormal, ReasonDeleting, "Removing vmkit")
		status.Phase = v1.KubeVirtPhaseDeleting
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionTrue, ReasonDeleting, "Removing every installed object", now)
		setCondition(status, v1.KubeVirtConditionAvailable, corev1.ConditionFalse, ReasonDeleting, "Removing every installed object", now)
		var err error
		if kv, err = c.writeStatusReturn(ctx, key, kv, status); err != nil {
			return err
		}
		status = kv.Status.DeepCopy()
	}
	if status.Phase != v1.KubeVirtPhaseDeleted {
		strategy, err := c.installedStrategy(ctx, kv)
		if errors.Is(err, ErrStrategyPending) {
			return reconcile.After(pendingRetry)
		}
		if err != nil {
			return fmt.Errorf("KubeVirt %s: %w", key, err)
		}
		if strategy != nil {
			res, err := installstrategy.Delete(ctx, c.dynamic, strategy, installstrategy.DeleteOptions{UninstallStrategy: kv.Spec.UninstallStrategy})
			if errors.Is(err, installstrategy.ErrWorkloadsExist) {
				setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonWorkloadsExist, err.Error(), now)
				if werr := c.writeStatus(ctx, key, kv, status); werr != nil {
					return werr
				}
				return reconcile.After(10 * time.Second)
			}
			if err != nil {
				setCondition(status, v1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonDeleteFailed, err.Error(), now)
				if werr := c.writeStatus(ctx, key, kv, status); werr != nil {
					return werr
				}
				return fmt.Errorf("KubeVirt %s: %w", key, err)
			}
			if len(res.Remaining) > 0 {
				c.logWaiting(ctx, key, res.Remaining)
				return reconcile.After(pendingRetry / 4)
			}
			c.logWaiting(ctx, key, nil)
			if err := installstrategy.DeleteCertificates(ctx, c.dynamic, strategy.Config.Namespace); err != nil {
				return fmt.Errorf("KubeVirt %s: %w", key, err)
			}
		}
		status.Phase = v1.KubeVirtPhaseDeleted
		setCondition(status, v1.KubeVirtConditionProgressing, corev1.ConditionFalse, ReasonDeleting, "Every installed object is removed", now)
		setCondition(status, v1.KubeVirtConditionCreated, corev1.ConditionFalse, ReasonDeleting, "Every installed object is removed", now)
		var err2 error
		if kv, err2 = c.writeStatusReturn(ctx, key, kv, status); err2 != nil {
			return err2
		}
	}
	kv = kv.DeepCopy()
	kv.Finalizers = slices.DeleteFunc(kv.Finalizers, func(f string) bool { return f == v1.KubeVirtFinalizer })
	if _, err := c.client.KubevirtV1().KubeVirts(kv.Namespace).Update(ctx, kv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("KubeVirt %s: removing finalizer: %w", key, err)
	}
	c.stale.Wrote(key, kv.ResourceVersion)
	return nil
}

// logWaiting logs what the uninstall of CR key waits for, when that
// changed since the last sync (it is retried every 500 ms).
func (c *Controller) logWaiting(ctx context.Context, key string, remaining []string) {
	what := strings.Join(remaining, ", ")
	c.mu.Lock()
	changed := c.waiting[key] != what
	if c.waiting == nil {
		c.waiting = map[string]string{}
	}
	if what == "" {
		delete(c.waiting, key)
	} else {
		c.waiting[key] = what
	}
	c.mu.Unlock()
	if changed && what != "" {
		klog.FromContext(ctx).Info("uninstalling: waiting for objects to go", "kubevirt", key, "remaining", what)
	}
}

// installedStrategy is the strategy of the observed (else target) config;
// nil when nothing was recorded as installed.
func (c *Controller) installedStrategy(ctx context.Context, kv *v1.KubeVirt) (*installstrategy.Strategy, error) {
	raw := kv.Status.ObservedDeploymentConfig
	if raw == "" {
		raw = kv.Status.TargetDeploymentConfig
	}
	if raw == "" {
		return nil, nil
	}
	cfg, err := installstrategy.ParseDeploymentConfig(raw)
	if err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.SetID()
	}
	return c.strategy(ctx, cfg)
}

// writeStatus writes status if it differs from kv's.
func (c *Controller) writeStatus(ctx context.Context, key string, kv *v1.KubeVirt, status *v1.KubeVirtStatus) error {
	_, err := c.writeStatusReturn(ctx, key, kv, status)
	return err
}

func (c *Controller) writeStatusReturn(ctx context.Context, key string, kv *v1.KubeVirt, status *v1.KubeVirtStatus) (*v1.KubeVirt, error) {
	if equality.Semantic.DeepEqual(&kv.Status, status) {
		return kv, nil
	}
	out := kv.DeepCopy()
	out.Status = *status
	updated, err := c.client.KubevirtV1().KubeVirts(kv.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	if err != nil {
		return kv, fmt.Errorf("KubeVirt %s: writing status: %w", key, err)
	}
	c.stale.Wrote(key, kv.ResourceVersion)
	return updated, nil
}

// condition returns the condition of type typ, nil when there is none.
func condition(status v1.KubeVirtStatus, typ v1.KubeVirtConditionType) *v1.KubeVirtCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == typ {
			return &status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition, keeping its transition time when the
// status does not change.
func setCondition(status *v1.KubeVirtStatus, typ v1.KubeVirtConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != s {
			c.LastTransitionTime = metav1.NewTime(now)
			c.LastProbeTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = s, reason, msg
		return
	}
	t := metav1.NewTime(now)
	status.Conditions = append(status.Conditions, v1.KubeVirtCondition{
		Type: typ, Status: s, Reason: reason, Message: msg, LastProbeTime: t, LastTransitionTime: t,
	})
}
