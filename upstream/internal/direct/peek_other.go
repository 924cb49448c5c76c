//go:build !unix

package direct

import "net"

// canPeek: stillOpen cannot tell a closed idle connection here, so Clients
// use net/http (see Usable).
const canPeek = false

func stillOpen(net.Conn) bool { return false }
