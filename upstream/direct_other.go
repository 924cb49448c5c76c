//go:build !unix

package upstream

import "net"

// canPeek: stillOpen cannot tell a closed idle connection here, so Clients
// use net/http (see useDirect).
const canPeek = false

func stillOpen(net.Conn) bool { return false }
