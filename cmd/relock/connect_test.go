package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// Passwords the tests give. None may ever show in relock's output; the
// second needs percent-encoding in a URL.
const (
	testPassword  = "hunter2-Xq7v"
	testPassword2 = "p@ss:w0rd-Kz"
	wrongPassword = "wrong-Jm4d"
	userPassword  = "alice-Rw8s"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"localhost", "localhost:6379"},
		{"redis.internal:7000", "redis.internal:7000"},
		{"10.0.0.1", "10.0.0.1:6379"},
		{"10.0.0.1:6380", "10.0.0.1:6380"},
		{"[::1]", "[::1]:6379"},
		{"[::1]:6380", "[::1]:6380"},
		{"::1", "[::1]:6379"},
		{"fe80::1", "[fe80::1]:6379"},
		{"[2001:db8::7]:7001", "[2001:db8::7]:7001"},
	} {
		got, err := parseAddr(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{":6379", "host:", "host:0", "host:65536", "host:x", "[::1", "[::1]x", "[redis]:1", "2001:db8::zz"} {
		if got, err := parseAddr(in); err == nil {
			t.Errorf("parseAddr(%q) = %q, want an error", in, got)
		}
	}
}

// resolveEnv resolves c with env as the whole environment.
func resolveEnv(c connFlags, env map[string]string) (*target, *redactor, error) {
	var r redactor
	tg, err := c.resolve(func(k string) string { return env[k] }, r.add)
	return tg, &r, err
}

func TestResolveForms(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     connFlags
		addrs     []string
		user, pw  string
		db        int
		masterSet string
		tls       bool
		where     string
	}{
		{name: "host", flags: connFlags{redis: "localhost"}, addrs: []string{"localhost:6379"}, where: "localhost:6379"},
		{name: "ipv6", flags: connFlags{redis: "[::1]:6380"}, addrs: []string{"[::1]:6380"}},
		{name: "seed list", flags: connFlags{redis: "a:7000, b ,[::1]:7002"},
			addrs: []string{"a:7000", "b:6379", "[::1]:7002"}, where: "a:7000,b:6379,[::1]:7002"},
		{name: "URL without port", flags: connFlags{redis: "redis://cache.internal"}, addrs: []string{"cache.internal:6379"}},
		{name: "URL user password db", flags: connFlags{redis: "redis://alice:" + testPassword + "@h:6390/3"},
			addrs: []string{"h:6390"}, user: "alice", pw: testPassword, db: 3, where: "redis://alice:xxxxx@h:6390/3"},
		{name: "URL password only", flags: connFlags{redis: "redis://:" + testPassword + "@h"},
			addrs: []string{"h:6379"}, pw: testPassword},
		{name: "URL encoded password", flags: connFlags{redis: "redis://:p%40ss%3Aw0rd-Kz@h"},
			addrs: []string{"h:6379"}, pw: testPassword2},
		{name: "rediss", flags: connFlags{redis: "rediss://h:6380"}, addrs: []string{"h:6380"}, tls: true},
		{name: "tls flag", flags: connFlags{redis: "h", tls: true}, addrs: []string{"h:6379"}, tls: true},
		{name: "sni implies tls", flags: connFlags{redis: "h", sni: "redis.test"}, addrs: []string{"h:6379"}, tls: true},
		{name: "unix", flags: connFlags{redis: "unix:///run/redis.sock?db=2"}, addrs: []string{"/run/redis.sock"}, db: 2},
		{name: "sentinel", flags: connFlags{redis: "redis://s1:26379?addr=s2:26379&addr=s3&master_set=mymaster"},
			addrs: []string{"s1:26379", "s2:26379", "s3:6379"}, masterSet: "mymaster"},
		{name: "user flag", flags: connFlags{redis: "h", user: "bob"}, addrs: []string{"h:6379"}, user: "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, _, err := resolveEnv(tc.flags, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := tg.opt
			if !slices.Equal(o.InitAddress, tc.addrs) {
				t.Errorf("InitAddress = %q, want %q", o.InitAddress, tc.addrs)
			}
			if o.Username != tc.user || o.Password != tc.pw || o.SelectDB != tc.db || o.Sentinel.MasterSet != tc.masterSet {
				t.Errorf("user %q password %q db %d master set %q; want %q %q %d %q",
					o.Username, o.Password, o.SelectDB, o.Sentinel.MasterSet, tc.user, tc.pw, tc.db, tc.masterSet)
			}
			if got := o.TLSConfig != nil; got != tc.tls {
				t.Errorf("TLS = %v, want %v", got, tc.tls)
			}
			if tc.tls && tc.flags.sni == "" && o.TLSConfig.ServerName != "" {
				t.Errorf("ServerName = %q, want it left to the dialer", o.TLSConfig.ServerName)
			}
			if tc.where != "" && tg.where != tc.where {
				t.Errorf("where = %q, want %q", tg.where, tc.where)
			}
			if !o.DisableCache || o.Dialer.Timeout <= 0 {
				t.Errorf("DisableCache %v, dial timeout %v", o.DisableCache, o.Dialer.Timeout)
			}
		})
	}
}

func TestResolvePasswordSources(t *testing.T) {
	env := map[string]string{"RELOCK_PASSWORD": "from-relock", "REDISCLI_AUTH": "from-redis-cli"}
	for _, tc := range []struct {
		name  string
		redis string
		env   map[string]string
		want  string
	}{
		{"URL first", "redis://:in-url@h", env, "in-url"},
		{"RELOCK_PASSWORD", "h", env, "from-relock"},
		{"RELOCK_PASSWORD with a URL user", "redis://alice@h", env, "from-relock"},
		{"REDISCLI_AUTH", "h", map[string]string{"REDISCLI_AUTH": "from-redis-cli"}, "from-redis-cli"},
		{"none", "h", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, r, err := resolveEnv(connFlags{redis: tc.redis}, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if tg.opt.Password != tc.want {
				t.Errorf("password = %q, want %q", tg.opt.Password, tc.want)
			}
			if tc.want != "" && strings.Contains(r.mask("x "+tc.want+" y"), tc.want) {
				t.Errorf("the password %q is not masked", tc.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "not-a-cert.pem")
	if err := os.WriteFile(ca, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags connFlags
		want  string
	}{
		{"empty", connFlags{redis: " "}, "empty"},
		{"bad port", connFlags{redis: "h:99999"}, "port"},
		{"empty in list", connFlags{redis: "a,,b"}, "empty address"},
		{"scheme", connFlags{redis: "http://h"}, "scheme"},
		{"bad URL", connFlags{redis: "redis://:" + testPassword + "@h:x/0"}, "redis://:xxxxx@h:x/0"},
		{"bad db", connFlags{redis: "redis://:" + testPassword + "@h/zero"}, "database"},
		{"user conflict", connFlags{redis: "redis://alice@h", user: "bob"}, "differ"},
		{"cert without key", connFlags{redis: "h", cert: "c.pem"}, "--key"},
		{"tls on unix", connFlags{redis: "unix:///tmp/r.sock", tls: true}, "unix"},
		{"missing cacert", connFlags{redis: "h", cacert: "/nonexistent/ca.pem"}, "--cacert"},
		{"bad cacert", connFlags{redis: "h", cacert: ca}, "no PEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r, err := resolveEnv(tc.flags, nil)
			if err == nil {
				t.Fatalf("no error, want one about %q", tc.want)
			}
			msg := r.mask(err.Error())
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not mention %q", msg, tc.want)
			}
			if strings.Contains(msg, testPassword) {
				t.Errorf("error %q shows the password", msg)
			}
		})
	}
}

func TestRedactorMasks(t *testing.T) {
	var r redactor
	r.add(testPassword2)
	for _, in := range []string{
		"AUTH " + testPassword2 + " failed",
		"redis://u:p%40ss%3Aw0rd-Kz@h:1 refused",
		"parse \"redis://:anything@h\": bad",
	} {
		got := r.mask(in)
		for _, secret := range []string{testPassword2, "p%40ss%3Aw0rd-Kz", "anything"} {
			if strings.Contains(got, secret) {
				t.Errorf("mask(%q) = %q, shows %q", in, got, secret)
			}
		}
	}
}

// wantNoSecret fails t if r's output shows any test password.
func wantNoSecret(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{testPassword, testPassword2, "p%40ss", wrongPassword, userPassword} {
		if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
			t.Errorf("output shows the secret %q\nstdout:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// wantOneLine fails t unless stderr is exactly one line and contains each
// of want.
func wantOneLine(t *testing.T, r result, want ...string) {
	t.Helper()
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not one line:\n%s", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not mention %q:\n%s", w, r.stderr)
		}
	}
}

// startAuthServer starts a redis-server that wants testPassword for the
// default user and knows the ACL user alice (userPassword).
func startAuthServer(t *testing.T) *redistest.Server {
	t.Helper()
	srv := redistest.Start(t)
	ctx := t.Context()
	if _, err := srv.Do(ctx, "ACL", "SETUSER", "alice", "on", ">"+userPassword, "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	// Last: the helper's own connections have no password.
	if _, err := srv.Do(ctx, "CONFIG", "SET", "requirepass", testPassword); err != nil {
		t.Fatal(err)
	}
	return srv
}

// authClient is an rlock Client of an auth server, on database db.
func authClient(t *testing.T, srv *redistest.Server, db int) *rlock.Client {
	t.Helper()
	opt := srv.ClientOption()
	opt.Password, opt.SelectDB = testPassword, db
	c, err := rlock.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConnectPassword(t *testing.T) {
	srv := startAuthServer(t)
	host, port, _ := net.SplitHostPort(srv.Addr)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
		says []string // on stderr, for a failure
	}{
		{name: "URL", args: []string{"--redis", "redis://:" + testPassword + "@" + srv.Addr}},
		{name: "URL with default user", args: []string{"--redis", "redis://default:" + testPassword + "@" + srv.Addr + "/0"}},
		{name: "RELOCK_PASSWORD", env: []string{"RELOCK_PASSWORD=" + testPassword}, args: []string{"--redis", srv.Addr}},
		{name: "REDISCLI_AUTH", env: []string{"REDISCLI_AUTH=" + testPassword}, args: []string{"--redis", srv.Addr}},
		{name: "RELOCK_REDIS URL", env: []string{"RELOCK_REDIS=redis://:" + testPassword + "@" + srv.Addr}},
		{name: "URL before RELOCK_PASSWORD", env: []string{"RELOCK_PASSWORD=" + wrongPassword},
			args: []string{"--redis", "redis://:" + testPassword + "@" + srv.Addr}},
		{name: "user flag", env: []string{"RELOCK_PASSWORD=" + userPassword}, args: []string{"--user", "alice", "--redis", srv.Addr}},
		{name: "user in URL", args: []string{"--redis", "redis://alice:" + userPassword + "@" + srv.Addr}},
		{name: "no password", args: []string{"--redis", srv.Addr}, want: exitUnavailable,
			says: []string{"NOAUTH", srv.Addr, "RELOCK_PASSWORD"}},
		{name: "wrong password", env: []string{"RELOCK_PASSWORD=" + wrongPassword}, args: []string{"--redis", srv.Addr},
			want: exitUnavailable, says: []string{"WRONGPASS"}},
		{name: "wrong password in URL", args: []string{"--redis", "redis://:" + wrongPassword + "@" + srv.Addr},
			want: exitUnavailable, says: []string{"WRONGPASS", "redis://:xxxxx@" + srv.Addr}},
		{name: "wrong user", env: []string{"RELOCK_PASSWORD=" + userPassword}, args: []string{"--user", "bob", "--redis", srv.Addr},
			want: exitUnavailable, says: []string{"WRONGPASS"}},
		{name: "unreachable", args: []string{"--redis", "redis://:" + testPassword + "@" + host + ":1"},
			want: exitUnavailable, says: []string{"redis://:xxxxx@" + host + ":1", "refused"}},
		{name: "unreachable encoded", args: []string{"--redis", "redis://:p%40ss%3Aw0rd-Kz@" + host + ":1"},
			want: exitUnavailable, says: []string{"xxxxx@"}},
		{name: "bad URL", args: []string{"--redis", "redis://:" + testPassword + "@" + host + ":" + port + ":9/0"},
			want: exitUsage, says: []string{"xxxxx"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := relocktest.Name(t)
			r := relockEnv(t, tc.env, append(tc.args, "status", name)...)
			wantCode(t, r, tc.want)
			wantNoSecret(t, r)
			if tc.want != exitOK {
				t.Log(strings.TrimSpace(r.stderr))
				wantOneLine(t, r, tc.says...)
			} else if !strings.Contains(r.stdout, "free") {
				t.Errorf("status output:\n%s", r.stdout)
			}
		})
	}

	t.Run("unlock", func(t *testing.T) {
		name := relocktest.Name(t)
		c := authClient(t, srv, 0)
		if err := c.GetLock(name).Lock(rlock.WithOwner(t.Context(), "holder")); err != nil {
			t.Fatal(err)
		}
		r := relockEnv(t, []string{"REDISCLI_AUTH=" + testPassword}, "unlock", "--force", "--redis", srv.Addr, name)
		wantCode(t, r, 0)
		wantNoSecret(t, r)
		if locked, err := c.GetLock(name).IsLocked(t.Context()); err != nil || locked {
			t.Errorf("IsLocked after unlock --force = %v, %v", locked, err)
		}
	})

	// run, with the flags after the subcommand, on database 5.
	t.Run("run on db 5", func(t *testing.T) {
		name := relocktest.Name(t)
		c5, c0 := authClient(t, srv, 5), authClient(t, srv, 0)
		dir := t.TempDir()
		ready, proceed := filepath.Join(dir, "ready"), fifo(t, dir)
		p := startRelockWith(t, procOptions{env: []string{"REDISCLI_AUTH=" + testPassword}},
			"run", "--redis", "redis://"+srv.Addr+"/5", name, "--", "sh", "-c", `: > "$0"; read x < "$1"`, ready, proceed)
		waitFile(t, ready, p)
		if locked, err := c5.GetLock(name).IsLocked(t.Context()); err != nil || !locked {
			t.Errorf("IsLocked on db 5 = %v, %v; want true", locked, err)
		}
		if locked, err := c0.GetLock(name).IsLocked(t.Context()); err != nil || locked {
			t.Errorf("IsLocked on db 0 = %v, %v; want false", locked, err)
		}
		release(t, proceed)
		r := p.wait(10 * time.Second)
		wantCode(t, r, 0)
		wantNoSecret(t, r)
	})
}

// fifo makes a named pipe in dir: a command that reads it waits until the
// test writes a line (see release).
func fifo(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fifo")
	if err := mkfifo(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// release writes a line to the fifo at path, which lets its reader go on.
func release(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

func TestConnectUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "rl") // short: socket paths are limited to about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	r := relock(t, "run", "--redis", "unix://"+sock, "unix-lock", "--", "echo", "ran")
	wantCode(t, r, 0)
	if r.stdout != "ran\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

func TestConnectSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	q := "?master_set=" + st.MasterSet
	for _, s := range st.Sentinels[1:] {
		q += "&addr=" + s.Addr
	}
	url := "redis://" + st.Sentinels[0].Addr + q
	name := "sentinel-lock"
	r := relock(t, "run", "--redis", url, name, "--", "true")
	wantCode(t, r, 0)
	holder, err := rlock.NewClient(st.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	l := holder.GetLock(name)
	if err := l.Lock(rlock.WithOwner(t.Context(), "holder")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = l.ForceUnlock(context.Background()) })
	r = relock(t, "--redis", url, "status", name)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, holder.ID()+":holder") {
		t.Errorf("status through the sentinels does not show the holder:\n%s", r.stdout)
	}
}

// tlsFiles are the PEM files of a test CA, a server certificate for the
// names localhost and redis.test (not for an IP address), and a client
// certificate.
type tlsFiles struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func makeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	f := tlsFiles{
		ca:         filepath.Join(dir, "ca.pem"),
		serverCert: filepath.Join(dir, "server.pem"),
		serverKey:  filepath.Join(dir, "server.key"),
		clientCert: filepath.Join(dir, "client.pem"),
		clientKey:  filepath.Join(dir, "client.key"),
	}
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "relock test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, f.ca, "CERTIFICATE", caDER)

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, certPath, keyPath string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			DNSNames:     dns,
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, certPath, "CERTIFICATE", der)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyPath, "PRIVATE KEY", keyDER)
	}
	issue(2, "localhost", x509.ExtKeyUsageServerAuth, []string{"localhost", "redis.test"}, f.serverCert, f.serverKey)
	issue(3, "relock test client", x509.ExtKeyUsageClientAuth, nil, f.clientCert, f.clientKey)
	return f
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSServer starts a redis-server with a plain port (for the test's
// own use) and a TLS port, whose number it returns. authClients is
// redis-server's --tls-auth-clients: "no", "optional" or "yes".
func startTLSServer(t *testing.T, f tlsFiles, authClients string) (srv *redistest.Server, tlsPort string) {
	t.Helper()
	var err error
	// The free port can be taken before the server binds it: try again.
	for range 3 {
		tlsPort = strconv.Itoa(freePort(t))
		srv, err = redistest.StartServer("--tls-port", tlsPort,
			"--tls-cert-file", f.serverCert, "--tls-key-file", f.serverKey,
			"--tls-ca-cert-file", f.ca, "--tls-auth-clients", authClients)
		if err == nil {
			t.Cleanup(func() { _ = srv.Stop() })
			return srv, tlsPort
		}
	}
	t.Fatalf("start redis-server with TLS: %v", err)
	return nil, ""
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

func TestConnectTLS(t *testing.T) {
	f := makeTLSFiles(t)
	srv, port := startTLSServer(t, f, "optional")
	// The lock is held over a TLS connection of the test's own, so that
	// status has something to show.
	holder, err := rlock.NewClient(rueidis.ClientOption{
		InitAddress:  []string{"localhost:" + port},
		DisableCache: true,
		TLSConfig:    &tls.Config{RootCAs: certPool(t, f.ca), ServerName: "redis.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	name := "tls-lock"
	l := holder.GetLock(name)
	if err := l.Lock(rlock.WithOwner(t.Context(), "holder")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(rlock.WithOwner(context.Background(), "holder")) })

	for _, tc := range []struct {
		name string
		args []string
		want int
		says []string
	}{
		{name: "rediss with cacert", args: []string{"--redis", "rediss://localhost:" + port, "--cacert", f.ca}},
		{name: "tls flag", args: []string{"--tls", "--cacert", f.ca, "--redis", "localhost:" + port}},
		{name: "sni for an IP", args: []string{"--redis", "127.0.0.1:" + port, "--cacert", f.ca, "--sni", "redis.test"}},
		{name: "insecure", args: []string{"--redis", "rediss://127.0.0.1:" + port, "--insecure"}},
		{name: "unknown CA", args: []string{"--redis", "rediss://localhost:" + port}, want: exitUnavailable,
			says: []string{"rediss://localhost:" + port, "certificate", "--cacert"}},
		{name: "name not in certificate", args: []string{"--tls", "--cacert", f.ca, "--redis", "127.0.0.1:" + port},
			want: exitUnavailable, says: []string{"127.0.0.1", "--sni"}},
		{name: "plain to the TLS port", args: []string{"--redis", "127.0.0.1:" + port}, want: exitUnavailable,
			says: []string{"--tls"}},
		{name: "TLS to the plain port", args: []string{"--tls", "--insecure", "--redis", srv.Addr}, want: exitUnavailable,
			says: []string{srv.Addr, "TLS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Flags before the subcommand, except in one case after it.
			args := append(slices.Clone(tc.args), "status", name)
			if tc.name == "sni for an IP" {
				args = append([]string{"status", name}, tc.args...)
			}
			r := relockEnv(t, []string{"RELOCK_PASSWORD=" + testPassword}, args...)
			wantCode(t, r, tc.want)
			wantNoSecret(t, r)
			if tc.want != exitOK {
				t.Log(strings.TrimSpace(r.stderr))
				wantOneLine(t, r, tc.says...)
				return
			}
			if !strings.Contains(r.stdout, holder.ID()+":holder") {
				t.Errorf("status over TLS does not show the holder:\n%s", r.stdout)
			}
		})
	}
}

func certPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

func TestConnectTLSClientCert(t *testing.T) {
	f := makeTLSFiles(t)
	_, port := startTLSServer(t, f, "yes")
	addr := "localhost:" + port

	r := relock(t, "--tls", "--cacert", f.ca, "--redis", addr,
		"run", "--cert", f.clientCert, "--key", f.clientKey, "client-cert-lock", "--", "echo", "ran")
	wantCode(t, r, 0)
	if r.stdout != "ran\n" {
		t.Errorf("stdout = %q", r.stdout)
	}

	r = relock(t, "--tls", "--cacert", f.ca, "--redis", addr, "status", "client-cert-lock")
	wantCode(t, r, exitUnavailable)
	t.Log(strings.TrimSpace(r.stderr))
	wantOneLine(t, r, addr, "--cert")
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := relock(t, args...)
		wantCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "relock ") || !strings.Contains(r.stdout, "go1.") ||
			!strings.Contains(r.stdout, "github.com/relock-go/relock") || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("relock %s printed %q", args[0], r.stdout)
		}
	}
}
