package dhcp

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzReply feeds raw packets to Reply as Serve does: whatever the bytes,
// Reply must not panic or fail on a valid lease, and an answer must encode
// to a packet that decodes, for the lease's client.
func FuzzReply(f *testing.F) {
	xid := dhcpv4.WithTransactionID(testXID)
	seeds := [][]dhcpv4.Modifier{
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover)},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 0, 2, 2)))},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(net.IPv4(10, 0, 2, 9))},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeInform), dhcpv4.WithClientIP(net.IPv4(10, 0, 2, 2))},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease)},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover), dhcpv4.WithOption(dhcpv4.OptClientIdentifier(make([]byte, 300)))},
	}
	for _, mods := range seeds {
		m, err := dhcpv4.New(append([]dhcpv4.Modifier{xid, dhcpv4.WithHwAddr(guestMAC)}, mods...)...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.ToBytes())
	}
	f.Add([]byte{})
	lease := testLease()
	f.Fuzz(func(t *testing.T, packet []byte) {
		req, err := dhcpv4.FromBytes(packet)
		if err != nil {
			return
		}
		resp, err := Reply(req, &lease)
		if err != nil {
			t.Fatalf("Reply on a valid lease: %v", err)
		}
		if resp == nil {
			return
		}
		m, err := dhcpv4.FromBytes(resp.ToBytes())
		if err != nil {
			t.Fatalf("the answer does not decode: %v\n%s", err, resp.Summary())
		}
		if m.TransactionID != req.TransactionID || m.ClientHWAddr.String() != guestMAC.String() {
			t.Fatalf("answered xid %v to %v, want xid %v to %v", m.TransactionID, m.ClientHWAddr, req.TransactionID, guestMAC)
		}
	})
}
