package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// TestImage builds the container image the way `make image` does
// (scripts/build-image.sh: buildah, no base image, nothing pulled) into a
// throwaway buildah store, reads the OCI archive it wrote — the config a
// runtime would apply and the layer a runtime would unpack — and runs the
// binary taken from that layer: -h, version, and serve against a throwaway
// redis-server until /readyz answers 200. No container is started (this
// machine cannot run one: docs/operations.md#deploying-on-kubernetes). buildah comes from
// scripts/install-buildah.sh (make test's prerequisite image-deps).
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Fatal("buildah is not on PATH: run scripts/install-buildah.sh (make image-deps)")
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	const version = "v0.0.0-imagetest"
	build := exec.Command("../scripts/build-image.sh", archive)
	build.Env = append(os.Environ(), "BUILDAH_ROOT="+filepath.Join(dir, "store"),
		"VERSION="+version, "IMAGE=localhost/flashgate:imagetest")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build-image.sh: %v\n%s", err, out)
	}
	t.Logf("image built in %v", time.Since(start).Round(time.Millisecond))
	// The store is written as root with vfs; its removal is t.TempDir's.

	blobs := readTar(t, archive)
	var index ocispec.Index
	decodeJSON(t, blobs["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != ocispec.MediaTypeImageIndex {
		t.Fatalf("index.json lists %+v, want one image index (the multi-arch manifest list)", index.Manifests)
	}
	var list ocispec.Index
	decodeJSON(t, blob(t, blobs, index.Manifests[0].Digest.String()), &list)
	platforms := map[string]ocispec.Manifest{}
	for _, d := range list.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		var m ocispec.Manifest
		decodeJSON(t, blob(t, blobs, d.Digest.String()), &m)
		platforms[d.Platform.OS+"/"+d.Platform.Architecture] = m
	}
	if len(platforms) != 2 || platforms["linux/amd64"].Config.Digest == "" || platforms["linux/arm64"].Config.Digest == "" {
		t.Fatalf("the image's platforms are %v, want linux/amd64 and linux/arm64", platforms)
	}
	// The other platform's binary: built for it by Go's cross-compiler.
	for p, m := range platforms {
		var pimg ocispec.Image
		decodeJSON(t, blob(t, blobs, m.Config.Digest.String()), &pimg)
		if pimg.OS+"/"+pimg.Architecture != p || pimg.Config.User != "65532:65532" {
			t.Errorf("%s: config says %s/%s, user %q", p, pimg.OS, pimg.Architecture, pimg.Config.User)
		}
		f, err := elf.NewFile(bytes.NewReader(layerFiles(t, blobs, m)["/flashgate"]))
		if err != nil {
			t.Fatalf("%s: /flashgate: %v", p, err)
		}
		if want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}[p]; f.Machine != want {
			t.Errorf("%s: /flashgate is for %v, want %v", p, f.Machine, want)
		}
	}
	manifest := platforms["linux/"+runtime.GOARCH]
	var img ocispec.Image
	decodeJSON(t, blob(t, blobs, manifest.Config.Digest.String()), &img)
	// make image tags the chart's default image too (values.yaml repository, Chart.yaml appVersion).
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	chartImage := ch.Values["image"].(map[string]any)["repository"].(string) + ":" + ch.Metadata.AppVersion
	if out, err := exec.Command("buildah", "inspect", "--root", filepath.Join(dir, "store", "root"),
		"--runroot", filepath.Join(dir, "store", "run"), "--storage-driver", "vfs", "--type", "manifest",
		chartImage).CombinedOutput(); err != nil {
		t.Errorf("make image did not tag the chart's default image %s: %v\n%s", chartImage, err, out)
	}

	c := img.Config
	if c.User != "65532:65532" {
		t.Errorf("User = %q, want the numeric non-root 65532:65532", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "/flashgate" || strings.Join(c.Cmd, " ") != "serve" {
		t.Errorf("Entrypoint %q Cmd %q, want [/flashgate] [serve]", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("ExposedPorts = %v, want 8080/tcp only", c.ExposedPorts)
	}
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["FLASHGATE_ADDR"] != ":8080" {
		t.Errorf("FLASHGATE_ADDR = %q, want :8080 (the binary's default listens on loopback only)", env["FLASHGATE_ADDR"])
	}
	revision, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		ocispec.AnnotationLicenses: "Apache-2.0",
		ocispec.AnnotationSource:   "https://github.com/flashgate/flashgate",
		ocispec.AnnotationVersion:  version,
		ocispec.AnnotationRevision: strings.TrimSpace(string(revision)),
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if _, err := time.Parse(time.RFC3339, c.Labels[ocispec.AnnotationCreated]); err != nil {
		t.Errorf("label %s: %v", ocispec.AnnotationCreated, err)
	}
	if out, err := exec.Command("buildah", "inspect", "--root", filepath.Join(dir, "store", "root"),
		"--runroot", filepath.Join(dir, "store", "run"), "--storage-driver", "vfs", "--type", "image",
		"--format", "{{.Docker.Config.Healthcheck}}", "localhost/flashgate:imagetest").CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "<nil>" {
		t.Errorf("buildah inspect: healthcheck %q (err %v), want none: probes are the orchestrator's", out, err)
	}

	files, modes := unpack(t, blobs, manifest)
	if lic := files["/usr/share/doc/flashgate/LICENSE"]; !bytes.Contains(lic, []byte("Apache License")) ||
		!bytes.Contains(files["/usr/share/doc/flashgate/NOTICE"], []byte("Prometheus")) {
		t.Error("the image carries no LICENSE (Apache-2.0) or NOTICE in /usr/share/doc/flashgate")
	}
	if !bytes.Contains(files["/etc/passwd"], []byte(":65532:65532:")) {
		t.Errorf("/etc/passwd has no line for uid 65532: %q", files["/etc/passwd"])
	}
	if !bytes.Contains(files["/etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")) {
		t.Error("/etc/ssl/certs/ca-certificates.crt: no CA bundle")
	}
	if h := modes["/var/lib/flashgate"]; h == nil || h.Uid != 65532 || h.Typeflag != tar.TypeDir {
		t.Errorf("/var/lib/flashgate = %+v, want a directory owned by 65532", h)
	}
	bin := filepath.Join(dir, "flashgate")
	if err := os.WriteFile(bin, files["/flashgate"], 0o755); err != nil || len(files["/flashgate"]) < 1<<20 {
		t.Fatalf("/flashgate from the layer: %d bytes, %v", len(files["/flashgate"]), err)
	}

	out, err := exec.Command(bin, "-h").Output()
	if err != nil || !strings.Contains(string(out), "flashgate serve") || !strings.Contains(string(out), "journal run") {
		t.Fatalf("flashgate -h: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "flashgate "+version {
		t.Fatalf("flashgate version = %q, %v; want the -ldflags version %q", out, err, version)
	}
	if out, err := exec.Command("go", "version", bin).Output(); err != nil || !strings.Contains(string(out), bin) {
		t.Fatalf("go version %s: %v %s", bin, err, out)
	} else if out, _ := exec.Command("go", "version", "-m", bin).Output(); !strings.Contains(string(out), "CGO_ENABLED=0") ||
		!strings.Contains(string(out), "-trimpath=true") {
		t.Errorf("the binary is not a static -trimpath build:\n%s", out)
	}

	serveFromImage(t, bin, env, dir)
}

// serveFromImage runs `serve` from the image twice, each against a
// throwaway redis-server until /readyz answers 200, then SIGTERM, which must
// end it with status 0: the binary taken from the layer, with the image's
// environment (FLASHGATE_ADDR and the key file moved to a free loopback
// port and dir); and the image itself under `buildah run --isolation
// chroot` (its own filesystem, user and environment; no OCI runtime, which
// cannot start here), where the process must run as uid 65532 and create
// its quick-start key ring in /var/lib/flashgate.
func serveFromImage(t *testing.T, bin string, imageEnv map[string]string, dir string) {
	redisPort := freePort(t)
	rs := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(redisPort),
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := rs.Start(); err != nil {
		t.Fatalf("redis-server (scripts/ensure-redis.sh installs it): %v", err)
	}
	t.Cleanup(func() { _ = rs.Process.Kill(); _ = rs.Wait() })
	redisURL := fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort)

	t.Run("binary", func(t *testing.T) {
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		cmd := exec.Command(bin, "serve")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range imageEnv {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, "FLASHGATE_ADDR="+addr,
			"FLASHGATE_KEYS_FILE="+filepath.Join(dir, "keys.json"), "REDIS_URL="+redisURL)
		logs := serveUntilReady(t, cmd, addr, func() error { return cmd.Process.Signal(syscall.SIGTERM) })
		if !strings.Contains(logs, `"level":"INFO"`) {
			t.Errorf("the image's FLASHGATE_LOG_FORMAT=json did not apply; logs:\n%s", logs)
		}
	})

	t.Run("buildah-run-chroot", func(t *testing.T) {
		store := []string{"--root", filepath.Join(dir, "store", "root"), "--runroot", filepath.Join(dir, "store", "run"),
			"--storage-driver", "vfs"}
		out, err := exec.Command("buildah", append(store, "from", "localhost/flashgate:imagetest")...).Output()
		if err != nil {
			t.Fatalf("buildah from: %v", err)
		}
		ctr := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("buildah", append(store, "rm", ctr)...).Run() })
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		cmd := exec.Command("buildah", append(store, "run", "--isolation", "chroot",
			"-e", "FLASHGATE_ADDR="+addr, "-e", "REDIS_URL="+redisURL, ctr, "--", "/flashgate", "serve")...)
		// buildah kills its child on SIGTERM: the graceful stop is the
		// process's own, so the signal goes to it (as a runtime's would).
		logs := serveUntilReady(t, cmd, addr, func() error {
			pid, uid := procOf(t, "FLASHGATE_ADDR="+addr)
			if uid != "65532" {
				t.Errorf("serve in the image runs as uid %q, want 65532", uid)
			}
			return syscall.Kill(pid, syscall.SIGTERM)
		})
		if !strings.Contains(logs, `"path":"/var/lib/flashgate/flashgate-keys.json"`) {
			t.Errorf("serve in the image did not create its key ring in /var/lib/flashgate; logs:\n%s", logs)
		}
	})
}

// serveUntilReady starts cmd, waits until http://addr/readyz answers 200,
// calls stop (which sends serve its SIGTERM) and expects cmd to exit with
// status 0. It returns the process's output.
func serveUntilReady(t *testing.T, cmd *exec.Cmd, addr string, stop func() error) string {
	t.Helper()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200 (last: %v %v); logs:\n%s", resp, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop after SIGTERM; logs:\n%s", logs.String())
	}
	return logs.String()
}

// procOf returns the pid and real uid of the process named /flashgate
// whose environment holds env (a unique FLASHGATE_ADDR), read from /proc.
func procOf(t *testing.T, env string) (int, string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if exe, _ := os.Readlink(filepath.Join(p, "exe")); filepath.Base(exe) != "flashgate" {
			continue
		}
		e, _ := os.ReadFile(filepath.Join(p, "environ"))
		if !bytes.Contains(append(append([]byte{0}, e...), 0), []byte("\x00"+env+"\x00")) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join(p, "status"))
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				pid, _ := strconv.Atoi(filepath.Base(p))
				return pid, f[1]
			}
		}
	}
	t.Fatalf("no /flashgate process with %s", env)
	return 0, ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// readTar returns the regular files of a tar archive by name.
func readTar(t *testing.T, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[path.Clean(h.Name)], err = io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func blob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	alg, hex, _ := strings.Cut(digest, ":")
	b, ok := blobs[path.Join("blobs", alg, hex)]
	if !ok {
		t.Fatalf("blob %s is not in the archive", digest)
	}
	return b
}

func decodeJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(v); err != nil {
		t.Fatalf("%T: %v", v, err)
	}
}

// layerFiles returns the regular files of m's layers unpacked in order, by
// absolute path.
func layerFiles(t *testing.T, blobs map[string][]byte, m ocispec.Manifest) map[string][]byte {
	files, _ := unpack(t, blobs, m)
	return files
}

// unpack reads m's layers in order: the regular files' contents and every
// entry's header, by absolute path.
func unpack(t *testing.T, blobs map[string][]byte, m ocispec.Manifest) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	for _, l := range m.Layers {
		r := io.Reader(bytes.NewReader(blob(t, blobs, l.Digest.String())))
		if strings.HasSuffix(l.MediaType, "+gzip") {
			gz, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = gz
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := path.Clean("/" + h.Name)
			headers[name] = h
			if h.Typeflag == tar.TypeReg {
				files[name], _ = io.ReadAll(tr)
			}
		}
	}
	return files, headers
}
