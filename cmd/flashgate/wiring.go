package main

import (
	"github.com/flashgate/flashgate/issuer"
	"github.com/flashgate/flashgate/server"
)

// The wiring's one promise: *issuer.Issuer plays every role the server
// declares (server.Queue, server.Admin, server.Observed). The server names
// only the roles; this binary hands it the issuer that plays them.
var (
	_ server.Queue    = (*issuer.Issuer)(nil)
	_ server.Admin    = (*issuer.Issuer)(nil)
	_ server.Observed = (*issuer.Issuer)(nil)
	_ server.Issuer   = (*issuer.Issuer)(nil)
)
