package keys_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgate/flashgate/keys"
	"github.com/flashgate/flashgate/verifier"
)

// doc is a private JWK Set as generic JSON, for hand edits.
type doc struct {
	Keys []map[string]any `json:"keys"`
}

func privateDoc(t *testing.T, r *keys.Ring) doc {
	t.Helper()
	b, err := r.MarshalPrivate()
	require.NoError(t, err)
	var d doc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&d))
	return d
}

func (d doc) marshal(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return b
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ring.jwks")
	now := time.Now()
	r, err := keys.Generate(now.Add(-time.Hour))
	require.NoError(t, err)
	require.NoError(t, r.Rotate(now, 5*time.Minute))
	require.NoError(t, r.Save(path))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	r2, err := keys.Load(path)
	require.NoError(t, err)
	assert.Equal(t, r.Keys(), r2.Keys())
	assert.Equal(t, r.ActiveKeyID(), r2.ActiveKeyID())
	j1, _ := r.PublicJWKS()
	j2, _ := r2.PublicJWKS()
	assert.Equal(t, j1, j2)
	t1, _ := r.Sign([]byte("x"))
	t2, _ := r2.Sign([]byte("x"))
	assert.Equal(t, t1, t2, "same private keys")

	// the file is a private JWK Set that jwx can parse, with our members
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	set, err := jwk.Parse(b)
	require.NoError(t, err)
	assert.Equal(t, 3, set.Len())
	d := privateDoc(t, r2)
	assert.Equal(t, "active", d.Keys[0]["flashgate_status"])
	assert.Equal(t, json.Number(jsonInt(now.Add(-time.Hour).Unix())), d.Keys[0]["flashgate_created"])
	assert.Equal(t, "next", d.Keys[1]["flashgate_status"])
	assert.Equal(t, json.Number(jsonInt(now.Unix())), d.Keys[1]["flashgate_created"])
	assert.Equal(t, "retired", d.Keys[2]["flashgate_status"])
	assert.Equal(t, json.Number(jsonInt(now.Add(5*time.Minute+keys.RetireMargin).Unix())), d.Keys[2]["flashgate_retire_until"])
	assert.NotContains(t, d.Keys[0], "flashgate_retire_until")
	assert.NotEmpty(t, d.Keys[0]["d"])

	// overwrite keeps 0600 and leaves no temporary files behind
	require.NoError(t, r2.Rotate(now.Add(time.Minute), 5*time.Minute))
	require.NoError(t, r2.Save(path))
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

// Readers never observe a partially written file.
func TestSaveIsAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.jwks")
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, r.Save(path))

	var stop atomic.Bool
	var loads atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := keys.Load(path)
				if !assert.NoError(t, err) {
					return
				}
				loads.Add(1)
			}
		}()
	}
	for i := range 25 {
		require.NoError(t, r.Rotate(time.Now().Add(time.Duration(i)*time.Hour), time.Minute))
		require.NoError(t, r.Save(path))
	}
	stop.Store(true)
	wg.Wait()
	assert.Positive(t, loads.Load())
}

func TestLoadRejects(t *testing.T) {
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	good := privateDoc(t, r)
	clone := func() doc {
		var d doc
		require.NoError(t, json.Unmarshal(good.marshal(t), &d))
		return d
	}
	// RFC 7515 A.2 RSA public key (a private one is refused the same way: kty first)
	rsaMap := map[string]any{
		"kty": "RSA", "e": "AQAB", "kid": "rsa", "flashgate_status": "next", "flashgate_created": 1,
		"n": "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ",
	}
	otherRing, err := keys.Generate(time.Now())
	require.NoError(t, err)
	otherDoc := privateDoc(t, otherRing)

	cases := map[string]func(d *doc){
		"two active": func(d *doc) { d.Keys[1]["flashgate_status"] = "active" },
		"no active":  func(d *doc) { d.Keys[0]["flashgate_status"] = "next" },
		"zero keys":  func(d *doc) { d.Keys = []map[string]any{} },
		"two next": func(d *doc) {
			k := otherDoc.Keys[1]
			d.Keys = append(d.Keys, k)
		},
		"wrong kid":             func(d *doc) { d.Keys[0]["kid"] = otherRing.ActiveKeyID() },
		"missing kid":           func(d *doc) { delete(d.Keys[0], "kid") },
		"duplicate key":         func(d *doc) { k := d.Keys[1]; d.Keys = append(d.Keys, k) },
		"RSA key":               func(d *doc) { d.Keys = append(d.Keys, rsaMap) },
		"public only":           func(d *doc) { delete(d.Keys[1], "d") },
		"x does not match d":    func(d *doc) { d.Keys[0]["x"] = otherDoc.Keys[0]["x"] },
		"X25519":                func(d *doc) { d.Keys[1]["crv"] = "X25519" },
		"unknown status":        func(d *doc) { d.Keys[1]["flashgate_status"] = "spare" },
		"missing created":       func(d *doc) { delete(d.Keys[1], "flashgate_created") },
		"fractional created":    func(d *doc) { d.Keys[1]["flashgate_created"] = 1.5 },
		"retired without until": func(d *doc) { d.Keys[1]["flashgate_status"] = "retired" },
		"until on active":       func(d *doc) { d.Keys[0]["flashgate_retire_until"] = 5 },
		"use enc":               func(d *doc) { d.Keys[0]["use"] = "enc" },
		"alg ES256":             func(d *doc) { d.Keys[0]["alg"] = "ES256" },
	}
	dir := t.TempDir()
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			d := clone()
			edit(&d)
			path := filepath.Join(dir, name+".jwks")
			require.NoError(t, os.WriteFile(path, d.marshal(t), 0o600))
			_, err := keys.Load(path)
			require.Error(t, err)
			assert.ErrorIs(t, err, keys.ErrInvalidRing)
			t.Log(err)
		})
	}
	for name, content := range map[string]string{"not JSON": "{", "no keys member": "{}", "keys not array": `{"keys":1}`} {
		t.Run(name, func(t *testing.T) {
			_, err := keys.ParsePrivate([]byte(content))
			assert.ErrorIs(t, err, keys.ErrInvalidRing)
		})
	}
	t.Run("control: unedited is accepted", func(t *testing.T) {
		_, err := keys.ParsePrivate(clone().marshal(t))
		assert.NoError(t, err)
	})
}

func TestLoadFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.jwks")
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, r.Save(path))

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = keys.Load(path)
	assert.ErrorIs(t, err, keys.ErrInsecureFile)
	assert.Contains(t, err.Error(), "chmod 600")

	for _, mode := range []os.FileMode{0o400, 0o600, 0o440} { // 0440: warned (Kubernetes fsGroup), accepted
		require.NoError(t, os.Chmod(path, mode))
		_, err = keys.Load(path)
		assert.NoError(t, err, "%04o", mode)
	}

	_, err = keys.Load(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestFileRingPicksUpRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.jwks")
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, r.Save(path))

	f, err := keys.OpenFile(path, keys.FileOptions{CheckEvery: 20 * time.Millisecond, Logger: quietLogger()})
	require.NoError(t, err)
	assert.Equal(t, r.ActiveKeyID(), f.ActiveKeyID())
	old := r.ActiveKeyID()

	// another process (the CLI) rotates the file
	other, err := keys.Load(path)
	require.NoError(t, err)
	require.NoError(t, other.Rotate(time.Now(), 5*time.Minute))
	require.NoError(t, other.Save(path))

	require.Eventually(t, func() bool { return f.ActiveKeyID() == other.ActiveKeyID() }, 2*time.Second, 5*time.Millisecond)
	tok, err := f.Sign([]byte(`{}`))
	require.NoError(t, err)
	assert.Contains(t, decodeHeader(t, tok), other.ActiveKeyID())
	_, err = f.PublicKey(context.Background(), old)
	assert.NoError(t, err, "retired key still published")
	assert.Equal(t, 3, parseJWKS(t, f).Len())
	assert.Len(t, f.Keys(), 3)

	// a broken file keeps the previous ring
	require.NoError(t, os.WriteFile(path+".tmp", []byte("{broken"), 0o600))
	require.NoError(t, os.Rename(path+".tmp", path))
	assert.Error(t, f.Reload())
	time.Sleep(30 * time.Millisecond)
	assert.Equal(t, other.ActiveKeyID(), f.ActiveKeyID())
	tok2, err := f.Sign([]byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, tok, tok2)

	// a fixed file is picked up again
	require.NoError(t, other.Rotate(time.Now(), 5*time.Minute))
	require.NoError(t, other.Save(path))
	require.Eventually(t, func() bool { return f.ActiveKeyID() == other.ActiveKeyID() }, 2*time.Second, 5*time.Millisecond)

	// a deleted file keeps the previous ring
	require.NoError(t, os.Remove(path))
	time.Sleep(30 * time.Millisecond)
	assert.Equal(t, other.ActiveKeyID(), f.ActiveKeyID())
}

func TestFileRingChecksLazily(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.jwks")
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.NoError(t, r.Save(path))
	f, err := keys.OpenFile(path, keys.FileOptions{Logger: quietLogger()}) // default 5 s
	require.NoError(t, err)
	require.NoError(t, r.Rotate(time.Now(), time.Minute))
	require.NoError(t, r.Save(path))
	assert.NotEqual(t, r.ActiveKeyID(), f.ActiveKeyID(), "not checked before CheckEvery")
	require.NoError(t, f.Reload())
	assert.Equal(t, r.ActiveKeyID(), f.ActiveKeyID())
}

func TestOpenFileCreateIfMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ring.jwks")
	_, err := keys.OpenFile(path, keys.FileOptions{})
	assert.ErrorIs(t, err, os.ErrNotExist)

	// several replicas starting at once end up with the same ring
	const n = 8
	rings := make([]*keys.FileRing, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rings[i], errs[i] = keys.OpenFile(path, keys.FileOptions{CreateIfMissing: true, Logger: quietLogger()})
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, rings[0].ActiveKeyID(), rings[i].ActiveKeyID())
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Len(t, rings[0].Keys(), 2)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left")

	// an existing file is loaded, not replaced
	again, err := keys.OpenFile(path, keys.FileOptions{CreateIfMissing: true, Logger: quietLogger()})
	require.NoError(t, err)
	assert.Equal(t, rings[0].ActiveKeyID(), again.ActiveKeyID())
	_, err = again.PublicKey(context.Background(), "nope")
	assert.True(t, errors.Is(err, verifier.ErrUnknownKey))
}

// TestDirectoryPath: a ring path that is a directory is refused as one
// (ErrIsDirectory, the path of a file to give instead) by Load, OpenFile
// and Save, whatever the directory's mode, never as a file too open
// (ErrInsecureFile, "chmod 600").
func TestDirectoryPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys.json")
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err := keys.Load(dir)
	require.ErrorIs(t, err, keys.ErrIsDirectory)
	assert.NotErrorIs(t, err, keys.ErrInsecureFile)
	assert.NotContains(t, err.Error(), "chmod")
	assert.Contains(t, err.Error(), filepath.Join(dir, "flashgate-keys.json"))
	_, err = keys.OpenFile(dir, keys.FileOptions{CreateIfMissing: true})
	require.ErrorIs(t, err, keys.ErrIsDirectory)
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	require.ErrorIs(t, r.Save(dir), keys.ErrIsDirectory)
}

// TestFileRingFollowsASecretVolume: a Kubernetes Secret volume (the Helm
// chart's key ring, deploy/helm/flashgate) is the kubelet's AtomicWriter
// layout — the file a symlink through ..data to a timestamped directory,
// mode 0440 with fsGroup — and an update swaps ..data by rename. A FileRing
// on the file's path follows the swap (the rotation CronJob's ring reaches
// every replica), and a group-readable ring loads.
func TestFileRingFollowsASecretVolume(t *testing.T) {
	dir := t.TempDir()
	write := func(stamp string, r *keys.Ring) {
		t.Helper()
		ts := filepath.Join(dir, stamp)
		require.NoError(t, os.Mkdir(ts, 0o750))
		data, err := r.MarshalPrivate()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(ts, "flashgate-keys.json"), data, 0o440))
		require.NoError(t, os.Chmod(filepath.Join(ts, "flashgate-keys.json"), 0o440))
		require.NoError(t, os.Symlink(stamp, filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	}
	r, err := keys.Generate(time.Now())
	require.NoError(t, err)
	write("..2026_11_27_03_00_00.1", r)
	path := filepath.Join(dir, "flashgate-keys.json")
	require.NoError(t, os.Symlink("..data/flashgate-keys.json", path))

	f, err := keys.OpenFile(path, keys.FileOptions{CheckEvery: 20 * time.Millisecond, Logger: quietLogger()})
	require.NoError(t, err)
	assert.Equal(t, r.ActiveKeyID(), f.ActiveKeyID())

	require.NoError(t, r.Rotate(time.Now(), 5*time.Minute))
	write("..2026_11_28_03_00_00.2", r)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_11_27_03_00_00.1")))
	require.Eventually(t, func() bool { return f.ActiveKeyID() == r.ActiveKeyID() }, 2*time.Second, 5*time.Millisecond)
	assert.Len(t, f.Keys(), 3)
}
