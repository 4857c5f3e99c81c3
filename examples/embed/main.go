// Command embed shows vmkit's controllers running inside a platform team's
// own controller-runtime manager: the manager provides leader election,
// metrics and health checks; vmkit's VirtualMachine,
// VirtualMachineInstance, VirtualMachineInstanceReplicaSet, node,
// VirtualMachinePool and disruption-budget controllers are added to it as
// Runnables, on vmkit's generated shared informers and client-go's.
package main

import (
	"context"
	"os"

	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmkit/vmkit/podtemplate"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	"github.com/vmkit/vmkit/vmcontrol/disruptionbudget"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
	"github.com/vmkit/vmkit/vmcontrol/node"
	"github.com/vmkit/vmkit/vmcontrol/pool"
	"github.com/vmkit/vmkit/vmcontrol/replicaset"
	"github.com/vmkit/vmkit/vmcontrol/vm"
	"github.com/vmkit/vmkit/vmcontrol/vmi"
)

func main() {
	log := ctrl.Log.WithName("embed")
	if err := run(); err != nil {
		log.Error(err, "embed failed")
		os.Exit(1)
	}
}

func run() error {
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:   true,
		LeaderElectionID: "my-platform-vm-controllers",
	})
	if err != nil {
		return err
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	renderer, err := podtemplate.New(podtemplate.Config{LauncherImage: "quay.io/my-platform/virt-launcher:v1"})
	if err != nil {
		return err
	}
	vmInformers := factory.Kubevirt().V1()
	vms, err := vm.New(vm.Config{Client: client.KubevirtV1(),
		VMs: vmInformers.VirtualMachines().Informer(), VMIs: vmInformers.VirtualMachineInstances().Informer()})
	if err != nil {
		return err
	}
	// The clientset's pods satisfy kubeclient's narrower interface.
	pods := kubeclient.PodsGetterFunc(func(ns string) kubeclient.PodInterface { return kube.CoreV1().Pods(ns) })
	vmis, err := vmi.New(vmi.Config{Client: client.KubevirtV1(), Kube: pods, Renderer: renderer,
		VMIs: vmInformers.VirtualMachineInstances().Informer(), Pods: kubeFactory.Core().V1().Pods().Informer()})
	if err != nil {
		return err
	}
	sets, err := replicaset.New(replicaset.Config{Client: client.KubevirtV1(),
		ReplicaSets: vmInformers.VirtualMachineInstanceReplicaSets().Informer(), VMIs: vmInformers.VirtualMachineInstances().Informer()})
	if err != nil {
		return err
	}
	// The clientset's nodes satisfy kubeclient.NodeInterface as they are.
	nodes, err := node.New(node.Config{Client: client.KubevirtV1(), Kube: kube.CoreV1().Nodes(),
		Nodes: kubeFactory.Core().V1().Nodes().Informer(), VMIs: vmInformers.VirtualMachineInstances().Informer(),
		Pods: kubeFactory.Core().V1().Pods().Informer()})
	if err != nil {
		return err
	}
	vmPools, err := pool.New(pool.Config{Client: client.KubevirtV1(), PoolClient: client.PoolV1beta1(),
		Pools: factory.Pool().V1beta1().VirtualMachinePools().Informer(), VMs: vmInformers.VirtualMachines().Informer()})
	if err != nil {
		return err
	}
	// The clientset's budgets satisfy kubeclient's narrower interface too.
	budgets, err := disruptionbudget.New(disruptionbudget.Config{
		Client: kubeclient.PodDisruptionBudgetsGetterFunc(func(ns string) kubeclient.PodDisruptionBudgetInterface {
			return kube.PolicyV1().PodDisruptionBudgets(ns)
		}),
		VMIs: vmInformers.VirtualMachineInstances().Informer(), Budgets: kubeFactory.Policy().V1().PodDisruptionBudgets().Informer(),
		Pods: kubeFactory.Core().V1().Pods().Informer(), Migrations: vmInformers.VirtualMachineInstanceMigrations().Informer(),
		KubeVirts: vmInformers.KubeVirts().Informer()})
	if err != nil {
		return err
	}
	// Informers first, then each controller: Start(ctx) error is all
	// controller-runtime asks of a Runnable. They run only on the leader.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		factory.Start(ctx.Done())
		kubeFactory.Start(ctx.Done())
		<-ctx.Done()
		factory.Shutdown()
		kubeFactory.Shutdown()
		return nil
	})); err != nil {
		return err
	}
	for _, c := range []manager.Runnable{manager.RunnableFunc(vms.Start), manager.RunnableFunc(vmis.Start), manager.RunnableFunc(sets.Start), manager.RunnableFunc(nodes.Start), manager.RunnableFunc(vmPools.Start), manager.RunnableFunc(budgets.Start)} {
		if err := mgr.Add(c); err != nil {
			return err
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
