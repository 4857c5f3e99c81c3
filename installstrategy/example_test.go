package installstrategy_test

import (
	"fmt"

	"github.com/vmkit/vmkit/installstrategy"
)

// Generate the strategy for a registry and version, and round-trip it
// through the ConfigMap virt-operator --dump-install-strategy writes.
func Example() {
	cfg := (&installstrategy.DeploymentConfig{
		Namespace: "kubevirt",
		Registry:  "quay.io/kubevirt",
		Version:   "v1.4.0",
	}).SetID()
	s, err := installstrategy.Generate(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range s.Deployments {
		fmt.Println(d.Name, d.Spec.Template.Spec.Containers[0].Image)
	}
	fmt.Println(s.DaemonSets[0].Name, s.DaemonSets[0].Spec.Template.Spec.Containers[0].Image)

	cm, err := s.ToConfigMap()
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := installstrategy.FromConfigMap(cm)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(back.Objects()) == len(s.Objects()), back.Config.ID == cfg.ID)
	// Output:
	// virt-api quay.io/kubevirt/virt-api:v1.4.0
	// virt-controller quay.io/kubevirt/virt-controller:v1.4.0
	// virt-handler quay.io/kubevirt/virt-handler:v1.4.0
	// true true
}

// The operator reads its own configuration from its environment.
func ExampleConfigFromEnv() {
	env := map[string]string{
		installstrategy.EnvOperatorImage:          "registry.example.com:5000/vmkit/virt-operator:v1.5.0",
		installstrategy.EnvTargetInstallNamespace: "vmkit-system",
	}
	cfg, err := installstrategy.ConfigFromEnv(func(k string) string { return env[k] }, []string{"KV_IO_EXTRA_ENV_HTTP_PROXY=http://proxy:3128"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Registry, cfg.Version, cfg.Namespace, cfg.PassthroughEnv)
	fmt.Println(cfg.Image("virt-launcher"))
	// Output:
	// registry.example.com:5000/vmkit v1.5.0 vmkit-system map[HTTP_PROXY:http://proxy:3128]
	// registry.example.com:5000/vmkit/virt-launcher:v1.5.0
}
