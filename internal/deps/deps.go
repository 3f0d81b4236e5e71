package main

import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/caarlos0/env/v11"
	_ "github.com/gofiber/fiber/v2"
	_ "github.com/lestrrat-go/jwx/v2/jwk"
	_ "github.com/lestrrat-go/jwx/v2/jws"
	_ "github.com/lestrrat-go/jwx/v2/jwt"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/stretchr/testify/require"
	_ "github.com/tetratelabs/wazero"
)

func main() {}
