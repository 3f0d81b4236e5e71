//go:build tinygo

// ABI version 2 glue between a wasm host and package verifier. It holds no
// verification logic: it copies bytes out of linear memory, calls verifier,
// and copies the result back. See README.md for the contract.

package main

import (
	"bytes"
	"context"
	"strconv"
	"time"
	"unsafe"

	"github.com/flashgate/flashgate/verifier"
)

// abiVersion is returned by abi_version. Bump it on any incompatible change
// to an export's signature or to the configure/result encodings.
//
// 2: adds verify_begin/verify_finish (the host-crypto path); every version 1
// export is unchanged.
const abiVersion = 2

// Glue status codes. They sit above every verifier.Code so that one i32
// return value can carry either.
const (
	statusBadArgument = 100 // a ptr/len pair or an alloc size is invalid
	statusBadKeys     = 101 // set_keys: the JWKS was rejected (previous keys kept)
	statusBadConfig   = 102 // configure: the configuration was rejected (previous config kept)
	statusNotReady    = 103 // verify before a successful set_keys and configure
	statusStaleHandle = 104 // verify_finish: handle unknown, finished, or overwritten

	// statusCheckSignature is verify_begin's request for one Ed25519
	// verification by the host (not an error: the result holds the record).
	statusCheckSignature = 200
)

// pendingSlots bounds the verifications begun and not yet finished. Handle
// h lives in slot h % pendingSlots, so a host that never finishes leaks
// nothing: the slot is reused pendingSlots begins later.
const pendingSlots = 256

// maxAlloc bounds one alloc; a JWKS is the largest input.
const maxAlloc = 16 << 20

var (
	// live holds every buffer handed out by alloc and not yet freed, so the
	// garbage collector keeps it (the host's pointer is invisible to it).
	live [][]byte

	keys       *verifier.StaticKeys
	cfg        verifier.Config
	configured bool
	v          *verifier.Verifier

	// now is the host's clock for the current verify call (Config.Now).
	now time.Time

	// result is the output of the last set_keys/configure/verify call.
	result []byte

	// pending holds the verifications verify_begin handed to the host.
	pending    [pendingSlots]slot
	nextHandle uint32
)

// slot is one begun verification; handle 0 marks it free.
type slot struct {
	handle uint32
	p      verifier.Pending
}

func clock() time.Time { return now }

//go:wasmexport abi_version
func abiVersionExport() int32 { return abiVersion }

// alloc returns a buffer of size bytes owned by the host until free.
// It returns 0 when size is 0 or larger than maxAlloc.
//
//go:wasmexport alloc
func alloc(size uint32) uint32 {
	if size == 0 || size > maxAlloc {
		return 0
	}
	buf := make([]byte, size)
	live = append(live, buf)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
}

// free releases a buffer from alloc. Freeing 0 or an unknown pointer is a no-op.
//
//go:wasmexport free
func free(ptr uint32) {
	if ptr == 0 {
		return
	}
	for i, b := range live {
		if uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) == ptr {
			last := len(live) - 1
			live[i] = live[last]
			live[last] = nil
			live = live[:last]
			return
		}
	}
}

// input copies len bytes at ptr out of linear memory, so that nothing the
// verifier keeps aliases a buffer the host will overwrite or free.
func input(ptr, n uint32) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	if ptr == 0 || n > maxAlloc || uint64(ptr)+uint64(n) > 1<<32 {
		return nil, false
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Add(nil, ptr)), n)...), true
}

func fail(status int32, msg string) int32 {
	result = append(result[:0], msg...)
	return status
}

// rebuild replaces the verifier once both keys and configuration are set.
func rebuild(k *verifier.StaticKeys, c verifier.Config) error {
	nv, err := verifier.New(k, c)
	if err != nil {
		return err
	}
	v = nv
	return nil
}

// set_keys replaces the key set with a JWKS document (key rotation). On
// failure the previous keys stay in use.
//
//go:wasmexport set_keys
func setKeys(ptr, n uint32) int32 {
	data, ok := input(ptr, n)
	if !ok {
		return fail(statusBadArgument, "set_keys: invalid ptr/len")
	}
	k, err := verifier.ParseJWKS(data)
	if err != nil {
		return fail(statusBadKeys, err.Error())
	}
	if configured {
		if err := rebuild(k, cfg); err != nil {
			return fail(statusBadKeys, err.Error())
		}
	}
	keys = k
	result = result[:0]
	return 0
}

// configure replaces the configuration: UTF-8 lines "name=value", names
// iss, aud (required), product, leeway, max_lifetime (seconds). On failure
// the previous configuration stays in use.
//
//go:wasmexport configure
func configure(ptr, n uint32) int32 {
	data, ok := input(ptr, n)
	if !ok {
		return fail(statusBadArgument, "configure: invalid ptr/len")
	}
	c := verifier.Config{Now: clock}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			continue
		}
		eq := bytes.IndexByte(line, '=')
		if eq < 0 {
			return fail(statusBadConfig, "configure: line without '=': "+string(line))
		}
		name, value := string(line[:eq]), string(line[eq+1:])
		switch name {
		case "iss":
			c.Issuer = value
		case "aud":
			c.Audience = value
		case "product":
			c.Product = value
		case "leeway", "max_lifetime":
			s, err := strconv.ParseInt(value, 10, 64)
			if err != nil || s < 0 || s > 1<<31 {
				return fail(statusBadConfig, "configure: "+name+" must be whole seconds: "+value)
			}
			if name == "leeway" {
				c.Leeway = time.Duration(s) * time.Second
			} else {
				c.MaxLifetime = time.Duration(s) * time.Second
			}
		default:
			return fail(statusBadConfig, "configure: unknown field "+name)
		}
	}
	if keys != nil {
		if err := rebuild(keys, c); err != nil {
			return fail(statusBadConfig, err.Error())
		}
	} else if _, err := verifier.New(verifier.NewStaticKeys(nil), c); err != nil {
		// Validate now even without keys, so configure reports its own errors.
		return fail(statusBadConfig, err.Error())
	}
	cfg, configured = c, true
	result = result[:0]
	return 0
}

// verify checks a token. product may be empty (then the configured product
// applies); user may be empty (then sub is not checked). nowUnix is the
// host's current time in Unix seconds. It returns a verifier.Code (0 = ok)
// or a glue status (≥ 100). On 0 the result holds the claims as JSON; on any
// other value it holds a diagnostic message.
//
//go:wasmexport verify
func verify(tokPtr, tokLen, productPtr, productLen, userPtr, userLen uint32, nowUnix int64) int32 {
	tok, want, status := request(tokPtr, tokLen, productPtr, productLen, userPtr, userLen, nowUnix)
	if status != 0 {
		return status
	}
	return answer(v.Verify(context.Background(), string(tok), want))
}

// verify_begin is verify up to the Ed25519 arithmetic, which it hands to
// the host. It returns what verify would (a final code, result as verify's)
// unless the token reaches the signature check; then it returns
// statusCheckSignature and the result holds the record
//
//	handle u32 (little endian) ‖ public key (32 B) ‖ signature (64 B) ‖ signing input
//
// The host verifies the signature and passes the outcome to verify_finish.
// The claims are judged at nowUnix, here.
//
//go:wasmexport verify_begin
func verifyBegin(tokPtr, tokLen, productPtr, productLen, userPtr, userLen uint32, nowUnix int64) int32 {
	tok, want, status := request(tokPtr, tokLen, productPtr, productLen, userPtr, userLen, nowUnix)
	if status != 0 {
		return status
	}
	p, err := v.Prepare(context.Background(), string(tok), want)
	if err != nil {
		return answer(nil, err)
	}
	nextHandle++
	if nextHandle == 0 {
		nextHandle = 1
	}
	h := nextHandle
	pending[h%pendingSlots] = slot{handle: h, p: p}
	sig := p.Signature()
	r := append(result[:0], byte(h), byte(h>>8), byte(h>>16), byte(h>>24))
	r = append(r, p.PublicKey()...)
	r = append(r, sig[:]...)
	result = append(r, p.SigningInput()...)
	return statusCheckSignature
}

// verify_finish completes a verify_begin: valid is 1 when the host's
// Ed25519 verification of the record accepted the signature, 0 otherwise.
// It returns what verify would have returned for the same call, with the
// result as verify's; statusStaleHandle when handle is unknown, already
// finished, or was overwritten by pendingSlots later begins (verify again).
//
//go:wasmexport verify_finish
func verifyFinish(handle uint32, valid int32) int32 {
	s := &pending[handle%pendingSlots]
	if handle == 0 || s.handle != handle {
		return fail(statusStaleHandle, "verify_finish: stale handle")
	}
	p := s.p
	*s = slot{}
	return answer(p.Finish(valid == 1))
}

// request copies a verify/verify_begin call's inputs and sets the clock.
func request(tokPtr, tokLen, productPtr, productLen, userPtr, userLen uint32, nowUnix int64) ([]byte, verifier.Expect, int32) {
	tok, ok1 := input(tokPtr, tokLen)
	product, ok2 := input(productPtr, productLen)
	user, ok3 := input(userPtr, userLen)
	if !ok1 || !ok2 || !ok3 {
		return nil, verifier.Expect{}, fail(statusBadArgument, "verify: invalid ptr/len")
	}
	if v == nil {
		return nil, verifier.Expect{}, fail(statusNotReady, "verify: call set_keys and configure first")
	}
	now = time.Unix(nowUnix, 0)
	return tok, verifier.Expect{Product: string(product), User: string(user)}, 0
}

// answer writes a verification's outcome: the claims JSON and 0, or the
// diagnostic and the error's code.
func answer(t *verifier.Token, err error) int32 {
	if err != nil {
		return fail(int32(verifier.CodeOf(err)), err.Error())
	}
	r := append(result[:0], `{"kid":`...)
	r = appendJSONString(r, t.KeyID)
	r = append(r, `,"iss":`...)
	r = appendJSONString(r, t.Issuer)
	r = append(r, `,"aud":`...)
	r = appendJSONString(r, t.Audience)
	r = append(r, `,"sub":`...)
	r = appendJSONString(r, t.User)
	r = append(r, `,"product":`...)
	r = appendJSONString(r, t.Product)
	r = append(r, `,"jti":`...)
	r = appendJSONString(r, t.ID)
	r = append(r, `,"iat":`...)
	r = strconv.AppendInt(r, t.IssuedAt.Unix(), 10)
	r = append(r, `,"exp":`...)
	r = strconv.AppendInt(r, t.ExpiresAt.Unix(), 10)
	result = append(r, '}')
	return 0
}

func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// result_ptr and result_len locate the output of the last set_keys,
// configure or verify call. It stays valid until the next call of any of
// those three (alloc and free do not touch it).
//
//go:wasmexport result_ptr
func resultPtr() uint32 {
	if len(result) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(result))))
}

//go:wasmexport result_len
func resultLen() uint32 { return uint32(len(result)) }
