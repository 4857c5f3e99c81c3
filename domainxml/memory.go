package domainxml

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"
)

// maxMemory bounds guest memory far above what any node holds, so sizes
// stay clear of integer overflow.
const maxMemory = 64 << 40

// convertMemory sets the guest memory (spec.domain.memory.guest, else the
// memory request, else the limit) and backs it with huge pages when asked.
func (c *converter) convertMemory() error {
	var q *resource.Quantity
	field := "spec.domain.memory.guest"
	mem := c.spec.Memory
	if mem != nil && mem.Guest != nil {
		q = mem.Guest
	} else if r, ok := c.spec.Resources.Requests[corev1.ResourceMemory]; ok {
		q, field = &r, "spec.domain.resources.requests.memory"
	} else if l, ok := c.spec.Resources.Limits[corev1.ResourceMemory]; ok {
		q, field = &l, "spec.domain.resources.limits.memory"
	} else {
		return fieldErrorf("spec.domain.resources.requests.memory", "required when spec.domain.memory.guest is unset")
	}
	bytes := q.Value()
	if bytes < 1<<20 {
		return fieldErrorf(field, "%s is less than the minimum of 1Mi", q)
	}
	if bytes > maxMemory {
		return fieldErrorf(field, "%s is more than the maximum of 64Ti", q)
	}
	c.dom.Memory = &libvirtxml.DomainMemory{Value: uint((bytes + 1023) / 1024), Unit: "KiB"}
	if err := c.convertMemoryHotplug(q, field); err != nil {
		return err
	}

	if mem == nil || mem.Hugepages == nil {
		return nil
	}
	page, err := resource.ParseQuantity(mem.Hugepages.PageSize)
	if err != nil {
		return fieldErrorf("spec.domain.memory.hugepages.pageSize", "%q is not a quantity", mem.Hugepages.PageSize)
	}
	size := page.Value()
	if size < 4096 || size&(size-1) != 0 {
		return fieldErrorf("spec.domain.memory.hugepages.pageSize", "%s is not a power of two of at least 4Ki", mem.Hugepages.PageSize)
	}
	if bytes%size != 0 {
		return fieldErrorf(field, "%s is not a multiple of the huge page size %s", q, mem.Hugepages.PageSize)
	}
	if mem.MaxGuest != nil && mem.MaxGuest.Value()%size != 0 {
		return fieldErrorf("spec.domain.memory.maxGuest", "%s is not a multiple of the huge page size %s", mem.MaxGuest, mem.Hugepages.PageSize)
	}
	c.dom.MemoryBacking = &libvirtxml.DomainMemoryBacking{
		MemoryHugePages: &libvirtxml.DomainMemoryHugepages{
			Hugepages: []libvirtxml.DomainMemoryHugepage{{Size: uint(size / 1024), Unit: "KiB"}},
		},
	}
	return nil
}
