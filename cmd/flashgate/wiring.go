package main

import (
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// The wiring's one promise: each role the server declares is played by the
// issuer's type of that role (server.Queue by *issuer.Queue, server.Admin by
// *issuer.Admin, server.Observed by *issuer.Metrics). The server names only
// the roles; this binary hands it the role types (serverRoles).
var (
	_ server.Queue    = (*issuer.Queue)(nil)
	_ server.Admin    = (*issuer.Admin)(nil)
	_ server.Observed = (*issuer.Metrics)(nil)
	_ server.Issuer   = roles{}
)

// roles is server.Issuer put together from the issuer's role types, each
// through the server's interface of that role only: the server reaches the
// buyer's path, the admin and the metrics reads, never *issuer.Issuer.
type roles struct {
	server.Queue
	server.Admin
	server.Observed
}

// serverRoles returns is's roles as the server takes them (Options.Issuer).
func serverRoles(is *issuer.Issuer) server.Issuer {
	return roles{Queue: is.Queue, Admin: is.Admin, Observed: is.Metrics}
}
