package server

import (
	"bufio"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/flashgate/flashgate/problem"
)

// junk returns n random bytes without CR or LF (so they never end a line),
// from a fixed seed.
func junk(n int) string {
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	b := make([]byte, 0, n)
	for len(b) < n {
		if c := byte(r.Uint32()); c != '\r' && c != '\n' {
			b = append(b, c)
		}
	}
	return string(b)
}

// TestHeaderTimeout runs over loopback TCP: a client that never finishes its
// request line and headers is answered 408 request_timeout (problem+json)
// and disconnected once Options.HeaderTimeout has passed, not after the
// read timeout of the whole request; malformed requests get problem+json.
func TestHeaderTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	e := newEnv(t, withOptions(func(o *Options) { o.HeaderTimeout = timeout }))
	base := e.listen()
	addr := strings.TrimPrefix(base, "http://")

	// timedOut sends raw on conn and asserts a 408 problem and the close,
	// both well within 2 s (the read timeout of a whole request is 15 s).
	timedOut := func(t *testing.T, conn net.Conn, raw string) {
		t.Helper()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		start := time.Now()
		_, err := conn.Write([]byte(raw))
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		readResp(t, res).problem(t, http.StatusRequestTimeout, problem.RequestTimeout)
		_, err = br.ReadByte()
		assert.ErrorIs(t, err, io.EOF, "the server closes the connection")
		assert.Less(t, time.Since(start), 2*time.Second, "answered and closed after the %s header timeout", timeout)
	}
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	t.Run("random header line without the final CRLF CRLF", func(t *testing.T) {
		timedOut(t, dial(t), "GET /healthz HTTP/1.1\r\nX-Junk: "+junk(200))
	})
	t.Run("a line of random bytes among the headers", func(t *testing.T) {
		timedOut(t, dial(t), "GET /healthz HTTP/1.1\r\nHost: x\r\n"+junk(200))
	})
	t.Run("random request line", func(t *testing.T) {
		timedOut(t, dial(t), junk(200))
	})
	t.Run("keep-alive: the next request is timed from its own first byte", func(t *testing.T) {
		conn := dial(t)
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		br := bufio.NewReader(conn)
		for range 2 {
			_, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
			require.NoError(t, err)
			res, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, readResp(t, res).status)
			time.Sleep(timeout + 200*time.Millisecond) // idle, not reading a request
		}
		timedOut(t, conn, "GET /healthz HTTP/1.1\r\nX-Junk: "+junk(50))
	})

	// Requests fasthttp cannot parse are answered through the ErrorHandler.
	for _, raw := range []string{
		junk(100) + "\r\n\r\n",
		"GET\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n",
	} {
		rawRequest(t, base, raw).problem(t, http.StatusBadRequest, problem.BadRequest)
	}
}

func TestHeaderTimeoutDefaults(t *testing.T) {
	e := newEnv(t)
	fs := e.srv.App().Server()
	assert.Equal(t, DefaultHeaderTimeout, fs.ReadTimeout, "the headers' timeout")
	assert.Equal(t, fasthttp.RequestConfig{ReadTimeout: BodyTimeout}, fs.HeaderReceived(&fasthttp.RequestHeader{}),
		"the body's timeout, once the headers are in")
}
