package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/flashgate/flashgate/verifier"
)

// Names of the private JWK members that carry the ring state.
const (
	memberStatus      = "flashgate_status"
	memberCreated     = "flashgate_created"
	memberRetireUntil = "flashgate_retire_until"
)

// maxRingFile bounds the size of a key ring file read by Load.
const maxRingFile = 1 << 20

// privateJWK is one member of the private JWK Set file.
type privateJWK struct {
	Kty         string `json:"kty"`
	Crv         string `json:"crv"`
	X           string `json:"x"`
	D           string `json:"d"`
	Kid         string `json:"kid"`
	Use         string `json:"use"`
	Alg         string `json:"alg"`
	Status      Status `json:"flashgate_status"`
	Created     int64  `json:"flashgate_created"`
	RetireUntil int64  `json:"flashgate_retire_until,omitempty"`
}

// MarshalPrivate returns the private JWK Set of the ring, the content that
// Save writes. It contains private keys.
func (r *Ring) MarshalPrivate() ([]byte, error) {
	r.mu.RLock()
	set := struct {
		Keys []privateJWK `json:"keys"`
	}{Keys: make([]privateJWK, 0, len(r.keys))}
	for _, k := range r.keys {
		j := privateJWK{
			Kty: "OKP", Crv: "Ed25519",
			X: b64.EncodeToString(k.pub), D: b64.EncodeToString(k.priv.Seed()),
			Kid: k.kid, Use: "sig", Alg: verifier.Alg,
			Status: k.status, Created: k.created.Unix(),
		}
		if k.status == StatusRetired {
			j.RetireUntil = k.retireUntil.Unix()
		}
		set.Keys = append(set.Keys, j)
	}
	r.mu.RUnlock()
	out, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ParsePrivate parses a private JWK Set (the format Save writes) and checks
// the ring rules. Errors wrap ErrInvalidRing.
func ParsePrivate(data []byte) (*Ring, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: not a JWK Set: %v", ErrInvalidRing, err)
	}
	if set.Keys == nil {
		return nil, fmt.Errorf("%w: not a JWK Set: no \"keys\" member", ErrInvalidRing)
	}
	ks := make([]*key, 0, len(set.Keys))
	for i, raw := range set.Keys {
		k, err := parsePrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrInvalidRing, i, err)
		}
		ks = append(ks, k)
	}
	return newRing(ks)
}

func parsePrivateKey(raw []byte) (*key, error) {
	jk, err := jwk.ParseKey(raw)
	if err != nil {
		return nil, err
	}
	if jk.KeyType() != jwa.OKP {
		return nil, fmt.Errorf("kty %q is not supported, want OKP (Ed25519)", jk.KeyType())
	}
	okp, ok := jk.(jwk.OKPPrivateKey)
	if !ok {
		return nil, errors.New(`no private key ("d" missing)`)
	}
	if okp.Crv() != jwa.Ed25519 {
		return nil, fmt.Errorf("crv %q is not supported, want Ed25519", okp.Crv())
	}
	var priv ed25519.PrivateKey
	if err := okp.Raw(&priv); err != nil { // also checks that x matches d
		return nil, err
	}
	var m struct {
		Kid         string `json:"kid"`
		Use         string `json:"use"`
		Alg         string `json:"alg"`
		Status      Status `json:"flashgate_status"`
		Created     *int64 `json:"flashgate_created"`
		RetireUntil *int64 `json:"flashgate_retire_until"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	if want := Thumbprint(pub); m.Kid != want {
		return nil, fmt.Errorf("kid %q is not the RFC 7638 thumbprint of the key (%q)", m.Kid, want)
	}
	if m.Use != "" && m.Use != "sig" {
		return nil, fmt.Errorf("kid %q: use %q, want sig", m.Kid, m.Use)
	}
	if m.Alg != "" && m.Alg != verifier.Alg {
		return nil, fmt.Errorf("kid %q: alg %q, want %s", m.Kid, m.Alg, verifier.Alg)
	}
	if m.Created == nil {
		return nil, fmt.Errorf("kid %q: %s missing", m.Kid, memberCreated)
	}
	var retireUntil time.Time
	switch {
	case m.Status == StatusRetired && m.RetireUntil == nil:
		return nil, fmt.Errorf("kid %q: retired key without %s", m.Kid, memberRetireUntil)
	case m.Status == StatusRetired:
		retireUntil = time.Unix(*m.RetireUntil, 0)
	case m.RetireUntil != nil:
		return nil, fmt.Errorf("kid %q: %s on a %q key", m.Kid, memberRetireUntil, m.Status)
	}
	switch m.Status {
	case StatusActive, StatusNext, StatusRetired:
	default:
		return nil, fmt.Errorf("kid %q: %s %q, want next, active or retired", m.Kid, memberStatus, m.Status)
	}
	return newKey(priv, m.Status, time.Unix(*m.Created, 0), retireUntil), nil
}

// Load reads a key ring from a private JWK Set file written by Save.
//
// It refuses (error wrapping ErrIsDirectory) a path that is a directory.
//
// It refuses (error wrapping ErrInsecureFile) a file that any user other
// than the owner and the owner's group may read or write (mode & 0o007 ≠ 0),
// and logs a warning via slog.Default (FileRing: FileOptions.Logger) when the group has access (mode & 0o070 ≠ 0,
// e.g. a Kubernetes Secret mounted with fsGroup). Save writes 0600. For a
// Kubernetes Secret volume set defaultMode: 0400. The check is skipped on
// Windows.
//
// It refuses (error wrapping ErrInvalidRing) rings without exactly one
// active key, with several next keys, with keys that are not Ed25519 private
// keys, and keys whose kid is not the RFC 7638 thumbprint.
func Load(path string) (*Ring, error) {
	r, _, err := loadFile(path, slog.Default())
	return r, err
}

// loadFile loads the ring and returns the FileInfo of the file it read.
func loadFile(path string, log *slog.Logger) (*Ring, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("keys: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("keys: %w", err)
	}
	if fi.IsDir() {
		return nil, nil, dirError(path)
	}
	if err := checkMode(path, fi.Mode(), log); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRingFile+1))
	if err != nil {
		return nil, nil, fmt.Errorf("keys: read %s: %w", path, err)
	}
	if len(data) > maxRingFile {
		return nil, nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidRing, path, maxRingFile)
	}
	r, err := ParsePrivate(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return r, fi, nil
}

// dirError is the error for a key ring path that is a directory.
func dirError(path string) error {
	return fmt.Errorf("%w: %s; give the key ring file's path, e.g. %s", ErrIsDirectory, path,
		filepath.Join(path, "flashgate-keys.json"))
}

func checkMode(path string, mode os.FileMode, log *slog.Logger) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	perm := mode.Perm()
	if perm&0o007 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; it holds private keys and must not be accessible to other users (chmod 600 %s)",
			ErrInsecureFile, path, perm, path)
	}
	if perm&0o070 != 0 {
		log.Warn("keys: key ring file is accessible to its group; prefer mode 0600 or 0400",
			"path", path, "mode", fmt.Sprintf("%04o", perm))
	}
	return nil
}

// Save writes the ring to path atomically with mode 0600 (an error wrapping
// ErrIsDirectory when path is a directory): it writes a
// temporary file in the same directory, fsyncs it, renames it over path
// and fsyncs the directory. Readers (Load, FileRing) see either the old or
// the new file, never a partial one.
func (r *Ring) Save(path string) error {
	data, err := r.MarshalPrivate()
	if err != nil {
		return err
	}
	return writeAtomic(path, data, false)
}

// writeAtomic writes data to path via a temporary file. With exclusive it
// fails with an error wrapping os.ErrExist when path already exists.
func writeAtomic(path string, data []byte, exclusive bool) (err error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return dirError(path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("keys: save: %w", err)
	}
	name := tmp.Name()
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		os.Remove(name) // no-op after a successful rename
	}()
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("keys: save: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("keys: save: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("keys: save: %w", err)
	}
	err = tmp.Close()
	tmp = nil
	if err != nil {
		return fmt.Errorf("keys: save: %w", err)
	}
	if exclusive {
		// A hard link creates path only if it does not exist yet, atomically.
		if err := os.Link(name, path); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("keys: save: %w", err)
			}
			// File systems without hard links: fall back to a check + rename.
			if _, serr := os.Lstat(path); serr == nil {
				return fmt.Errorf("keys: save %s: %w", path, os.ErrExist)
			}
			if err := os.Rename(name, path); err != nil {
				return fmt.Errorf("keys: save: %w", err)
			}
		}
	} else if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("keys: save: %w", err)
	}
	if d, err := os.Open(dir); err == nil { // persist the rename; best effort
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// FileOptions configure OpenFile. The zero value is usable.
type FileOptions struct {
	// CheckEvery is the longest time between two checks of the file for a
	// change (modification time, size, mode, inode). Checks are lazy: they
	// happen on use (Sign, PublicJWKS, PublicKey, …), at most once per
	// CheckEvery, without blocking other callers. Zero means 5 s.
	CheckEvery time.Duration
	// CreateIfMissing generates a new ring (one active and one next key) and
	// saves it when the file does not exist (quick start). When several
	// processes race to create it, one file wins and all of them load it.
	CreateIfMissing bool
	// Logger receives reload and reload-failure messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultCheckEvery is FileOptions.CheckEvery when it is zero.
const DefaultCheckEvery = 5 * time.Second

// FileRing is a Ring loaded from a file and reloaded when the file changes,
// so that `flashgate keys rotate` run against the file is picked up by every
// running issuer replica within FileOptions.CheckEvery. A reload that fails
// keeps the previous ring and logs the error.
//
// All methods are safe for concurrent use.
type FileRing struct {
	path  string
	every time.Duration
	log   *slog.Logger

	ring      atomic.Pointer[Ring]
	nextCheck atomic.Int64 // unix nanoseconds of the next due check

	mu      sync.Mutex // serialises checks and reloads
	stamp   os.FileInfo
	lastErr string
}

var _ verifier.PreparedKeySet = (*FileRing)(nil)

// OpenFile loads the ring at path (see Load) and returns a FileRing that
// follows changes of the file. With opts.CreateIfMissing a missing file is
// created with a new ring (its directory with mode 0700 if needed).
func OpenFile(path string, opts FileOptions) (*FileRing, error) {
	f := &FileRing{path: path, every: opts.CheckEvery, log: opts.Logger}
	if f.every <= 0 {
		f.every = DefaultCheckEvery
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	if opts.CreateIfMissing {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := createRing(path); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, err
			} else if err == nil {
				f.log.Warn("keys: no key ring file found; generated a new key ring (quick start)", "path", path)
			}
		}
	}
	r, fi, err := loadFile(path, f.log)
	if err != nil {
		return nil, err
	}
	f.ring.Store(r)
	f.stamp = fi
	f.nextCheck.Store(time.Now().Add(f.every).UnixNano())
	return f, nil
}

func createRing(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	r, err := Generate(time.Now())
	if err != nil {
		return err
	}
	data, err := r.MarshalPrivate()
	if err != nil {
		return err
	}
	return writeAtomic(path, data, true)
}

// Path returns the file the ring is loaded from.
func (f *FileRing) Path() string { return f.path }

// Ring returns the ring currently in use, after a due check of the file.
// The returned ring is a snapshot that the next reload replaces: do not
// Rotate it (rotate with Load, Rotate and Save against the file instead).
func (f *FileRing) Ring() *Ring {
	if time.Now().UnixNano() >= f.nextCheck.Load() && f.mu.TryLock() {
		_ = f.checkLocked(false)
		f.mu.Unlock()
	}
	return f.ring.Load()
}

// Reload re-reads the file now, whether or not it changed. On error the
// previous ring stays in use.
func (f *FileRing) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checkLocked(true)
}

func (f *FileRing) checkLocked(force bool) error {
	f.nextCheck.Store(time.Now().Add(f.every).UnixNano())
	fi, err := os.Stat(f.path)
	if err != nil {
		f.failed(err)
		return err
	}
	if !force && sameFile(f.stamp, fi) {
		return nil
	}
	r, lfi, err := loadFile(f.path, f.log)
	if err != nil {
		f.stamp = fi // do not retry (and log) this same version of the file again
		f.failed(err)
		return err
	}
	old := f.ring.Swap(r)
	f.stamp = lfi
	f.lastErr = ""
	if old == nil || old.ActiveKeyID() != r.ActiveKeyID() || !bytes.Equal(mustJWKS(old), mustJWKS(r)) {
		f.log.Info("keys: key ring reloaded", "path", f.path, "active_kid", r.ActiveKeyID(), "keys", len(r.Keys()))
	}
	return nil
}

func mustJWKS(r *Ring) []byte {
	b, _ := r.PublicJWKS()
	return b
}

func (f *FileRing) failed(err error) {
	if msg := err.Error(); msg != f.lastErr {
		f.lastErr = msg
		f.log.Error("keys: key ring reload failed; keeping the previous ring", "path", f.path, "err", err)
	}
}

// sameFile reports whether b describes the same version of the file as a.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) &&
		a.Size() == b.Size() && a.Mode() == b.Mode()
}

// Sign signs payload with the active key of the current ring (see Ring.Sign).
func (f *FileRing) Sign(payload []byte) (string, error) { return f.Ring().Sign(payload) }

// PublicJWKS returns the public JWK Set of the current ring (see Ring.PublicJWKS).
func (f *FileRing) PublicJWKS() ([]byte, error) { return f.Ring().PublicJWKS() }

// SignInvite signs an invite with the current ring (Ring.SignInvite).
func (f *FileRing) SignInvite(payload []byte) (string, error) { return f.Ring().SignInvite(payload) }

// SignReceipt signs a join receipt with the current ring (Ring.SignReceipt).
func (f *FileRing) SignReceipt(payload []byte) (string, error) { return f.Ring().SignReceipt(payload) }

// SignBeacon signs a room beacon with the current ring (Ring.SignBeacon).
func (f *FileRing) SignBeacon(payload []byte) (string, error) { return f.Ring().SignBeacon(payload) }

// PublicKey implements verifier.KeySet over the current ring (see Ring.PublicKey).
func (f *FileRing) PublicKey(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	return f.Ring().PublicKey(ctx, kid)
}

// PreparedKey implements verifier.PreparedKeySet over the current ring (see
// Ring.PreparedKey): after a reload it answers with the new ring's keys.
func (f *FileRing) PreparedKey(ctx context.Context, kid string) (verifier.PreparedKey, error) {
	return f.Ring().PreparedKey(ctx, kid)
}

// ActiveKeyID returns the kid of the current ring's active key.
func (f *FileRing) ActiveKeyID() string { return f.Ring().ActiveKeyID() }

// Keys lists the keys of the current ring (see Ring.Keys).
func (f *FileRing) Keys() []KeyInfo { return f.Ring().Keys() }
