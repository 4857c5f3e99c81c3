package operator

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vmkit/vmkit/installstrategy"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// StrategyLoader returns the install strategy of a deployment config.
type StrategyLoader interface {
	// Load returns the strategy, or an error wrapping ErrStrategyPending
	// when it is being produced and Load should be called again later.
	Load(ctx context.Context, cfg *installstrategy.DeploymentConfig) (*installstrategy.Strategy, error)
}

// ErrStrategyPending says a strategy is being produced (a dump Job runs).
var ErrStrategyPending = errors.New("install strategy is being produced")

// Generated generates strategies in process, with this operator's code.
type Generated struct{}

// Load generates the strategy of cfg.
func (Generated) Load(_ context.Context, cfg *installstrategy.DeploymentConfig) (*installstrategy.Strategy, error) {
	return installstrategy.Generate(cfg)
}

// ConfigMapStrategies loads strategies from the ConfigMaps
// virt-operator --dump-install-strategy writes, so that each version's
// strategy comes from that version's own operator image. When a ConfigMap
// is missing it runs that command as a Job (if CreateJobs) and reports
// ErrStrategyPending until the ConfigMap appears.
type ConfigMapStrategies struct {
	// Kube reads ConfigMaps and creates Jobs.
	Kube kubernetes.Interface
	// Namespace holds the ConfigMaps and Jobs (the operator's namespace).
	Namespace string
	// CreateJobs runs the dump Job for missing strategies.
	CreateJobs bool
	// ServiceAccount of the Job (default kubevirt-operator): it needs
	// create on ConfigMaps in Namespace.
	ServiceAccount string
}

// DumpJobName is the Job writing the strategy of the config with this ID.
func DumpJobName(id string) string { return "virt-install-strategy-dump-" + id }

// Load reads the ConfigMap of cfg.ID or starts the Job that writes it.
func (l *ConfigMapStrategies) Load(ctx context.Context, cfg *installstrategy.DeploymentConfig) (*installstrategy.Strategy, error) {
	name := installstrategy.ConfigMapName(cfg.ID)
	cm, err := l.Kube.CoreV1().ConfigMaps(l.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		s, err := installstrategy.FromConfigMap(cm)
		if err != nil {
			return nil, err
		}
		if s.Config.ID != cfg.ID {
			return nil, fmt.Errorf("ConfigMap %s/%s holds config %s, want %s", l.Namespace, name, s.Config.ID, cfg.ID)
		}
		return s, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", l.Namespace, name, err)
	}
	if !l.CreateJobs {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", l.Namespace, name, ErrStrategyPending)
	}
	job := l.dumpJob(cfg)
	if _, err := l.Kube.BatchV1().Jobs(l.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Job %s/%s: %w", l.Namespace, job.Name, err)
	}
	return nil, fmt.Errorf("dump job %s/%s writes ConfigMap %s: %w", l.Namespace, job.Name, name, ErrStrategyPending)
}

// dumpJob runs the target version's operator image with
// --dump-install-strategy and the resolved config in its environment.
func (l *ConfigMapStrategies) dumpJob(cfg *installstrategy.DeploymentConfig) *batchv1.Job {
	account := l.ServiceAccount
	if account == "" {
		account = "kubevirt-operator"
	}
	image := cfg.Image(v1.VirtOperatorValue)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DumpJobName(cfg.ID),
			Namespace:   l.Namespace,
			Labels:      map[string]string{v1.AppLabel: v1.VirtOperatorValue, v1.InstallStrategyLabel: ""},
			Annotations: map[string]string{v1.InstallStrategyIdentifierAnnotation: cfg.ID},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(3)),
			TTLSecondsAfterFinished: ptr(int32(600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.AppLabel: v1.VirtOperatorValue}},
				Spec: corev1.PodSpec{
					ServiceAccountName: account,
					RestartPolicy:      corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:            "dump-install-strategy",
						Image:           image,
						ImagePullPolicy: cfg.PullPolicy(),
						Command:         []string{v1.VirtOperatorValue, "--dump-install-strategy"},
						Env: []corev1.EnvVar{
							{Name: installstrategy.EnvOperatorImage, Value: image},
							{Name: installstrategy.EnvTargetInstallNamespace, Value: cfg.Namespace},
							{Name: installstrategy.EnvTargetImagePullPolicy, Value: string(cfg.PullPolicy())},
							{Name: installstrategy.EnvTargetDeploymentConfig, Value: cfg.JSON()},
						},
					}},
				},
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }
