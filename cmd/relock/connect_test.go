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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		if assert.NoError(t, err, "parseAddr(%q)", tc.in) {
			assert.Equal(t, tc.want, got, "parseAddr(%q)", tc.in)
		}
	}
	for _, in := range []string{":6379", "host:", "host:0", "host:65536", "host:x", "[::1", "[::1]x", "[redis]:1", "2001:db8::zz"} {
		got, err := parseAddr(in)
		assert.Error(t, err, "parseAddr(%q) = %q, want an error", in, got)
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
			require.NoError(t, err)
			o := tg.opt
			assert.Equal(t, tc.addrs, o.InitAddress, "InitAddress")
			assert.Equal(t, tc.user, o.Username, "user")
			assert.Equal(t, tc.pw, o.Password, "password")
			assert.Equal(t, tc.db, o.SelectDB, "database")
			assert.Equal(t, tc.masterSet, o.Sentinel.MasterSet, "master set")
			assert.Equal(t, tc.tls, o.TLSConfig != nil, "TLS")
			if tc.tls && tc.flags.sni == "" {
				assert.Empty(t, o.TLSConfig.ServerName, "ServerName: want it left to the dialer")
			}
			if tc.where != "" {
				assert.Equal(t, tc.where, tg.where, "where")
			}
			assert.True(t, o.DisableCache, "DisableCache")
			assert.Positive(t, o.Dialer.Timeout, "dial timeout")
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
			require.NoError(t, err)
			assert.Equal(t, tc.want, tg.opt.Password, "password")
			if tc.want != "" {
				assert.NotContains(t, r.mask("x "+tc.want+" y"), tc.want, "the password is not masked")
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "not-a-cert.pem")
	require.NoError(t, os.WriteFile(ca, []byte("hello"), 0o600))
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
			require.Error(t, err, "want an error about %q", tc.want)
			msg := r.mask(err.Error())
			assert.Contains(t, msg, tc.want, "error")
			assert.NotContains(t, msg, testPassword, "the error shows the password")
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
			assert.NotContains(t, got, secret, "mask(%q)", in)
		}
	}
}

// wantNoSecret fails t if r's output shows any test password.
func wantNoSecret(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{testPassword, testPassword2, "p%40ss", wrongPassword, userPassword} {
		assert.NotContains(t, r.stdout, s, "stdout shows a secret")
		assert.NotContains(t, r.stderr, s, "stderr shows a secret")
	}
}

// wantOneLine fails t unless stderr is exactly one line and contains each
// of want.
func wantOneLine(t *testing.T, r result, want ...string) {
	t.Helper()
	assert.True(t, strings.Count(r.stderr, "\n") == 1 && strings.HasSuffix(r.stderr, "\n"), "stderr is not one line:\n%s", r.stderr)
	for _, w := range want {
		assert.Contains(t, r.stderr, w, "stderr")
	}
}

// startAuthServer starts a redis-server that wants testPassword for the
// default user and knows the ACL user alice (userPassword).
func startAuthServer(t *testing.T) *redistest.Server {
	t.Helper()
	srv := redistest.Start(t)
	ctx := t.Context()
	_, err := srv.Do(ctx, "ACL", "SETUSER", "alice", "on", ">"+userPassword, "~*", "&*", "+@all")
	require.NoError(t, err)
	// Last: the helper's own connections have no password.
	_, err = srv.Do(ctx, "CONFIG", "SET", "requirepass", testPassword)
	require.NoError(t, err)
	return srv
}

// authClient is an rlock Client of an auth server, on database db.
func authClient(t *testing.T, srv *redistest.Server, db int) *rlock.Client {
	t.Helper()
	opt := srv.ClientOption()
	opt.Password, opt.SelectDB = testPassword, db
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
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
		want int      // exitNoSuchLock: connected, and found nothing under the name
		says []string // on stderr
	}{
		{name: "URL", args: []string{"--redis", "redis://:" + testPassword + "@" + srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "URL with default user", args: []string{"--redis", "redis://default:" + testPassword + "@" + srv.Addr + "/0"},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "RELOCK_PASSWORD", env: []string{"RELOCK_PASSWORD=" + testPassword}, args: []string{"--redis", srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "REDISCLI_AUTH", env: []string{"REDISCLI_AUTH=" + testPassword}, args: []string{"--redis", srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "RELOCK_REDIS URL", env: []string{"RELOCK_REDIS=redis://:" + testPassword + "@" + srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "URL before RELOCK_PASSWORD", env: []string{"RELOCK_PASSWORD=" + wrongPassword},
			args: []string{"--redis", "redis://:" + testPassword + "@" + srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "user flag", env: []string{"RELOCK_PASSWORD=" + userPassword}, args: []string{"--user", "alice", "--redis", srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
		{name: "user in URL", args: []string{"--redis", "redis://alice:" + userPassword + "@" + srv.Addr},
			want: exitNoSuchLock, says: []string{"no such lock"}},
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
			t.Log(strings.TrimSpace(r.stderr))
			wantOneLine(t, r, tc.says...)
		})
	}

	t.Run("unlock", func(t *testing.T) {
		name := relocktest.Name(t)
		c := authClient(t, srv, 0)
		require.NoError(t, c.GetLock(name).Lock(rlock.WithOwner(t.Context(), "holder")))
		r := relockEnv(t, []string{"REDISCLI_AUTH=" + testPassword}, "unlock", "--force", "--redis", srv.Addr, name)
		wantCode(t, r, 0)
		wantNoSecret(t, r)
		locked, err := c.GetLock(name).IsLocked(t.Context())
		require.NoError(t, err)
		assert.False(t, locked, "IsLocked after unlock --force")
	})

	// run, with the flags after the subcommand, on database 5.
	t.Run("run on db 5", func(t *testing.T) {
		name := relocktest.Name(t)
		c5, c0 := authClient(t, srv, 5), authClient(t, srv, 0)
		dir := t.TempDir()
		ready, proceed := filepath.Join(dir, "ready"), fifo(t, dir)
		p := startRelockWith(t, procOptions{env: []string{"REDISCLI_AUTH=" + testPassword}},
			"run", "--redis", "redis://"+srv.Addr+"/5", name, "--", "sh", "-c", `echo ready > "$0"; read x < "$1"`, ready, proceed)
		waitReady(t, ready, p)
		locked, err := c5.GetLock(name).IsLocked(t.Context())
		require.NoError(t, err)
		assert.True(t, locked, "IsLocked on db 5")
		locked, err = c0.GetLock(name).IsLocked(t.Context())
		require.NoError(t, err)
		assert.False(t, locked, "IsLocked on db 0")
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
	require.NoError(t, mkfifo(path))
	return path
}

// release writes a line to the fifo at path, which lets its reader go on.
func release(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("go\n")
	require.NoError(t, err)
}

func TestConnectUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "rl") // short: socket paths are limited to about 100 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	r := relock(t, "run", "--redis", "unix://"+sock, "unix-lock", "--", "echo", "ran")
	wantCode(t, r, 0)
	assert.Equal(t, "ran\n", r.stdout, "stdout")
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
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	l := holder.GetLock(name)
	require.NoError(t, l.Lock(rlock.WithOwner(t.Context(), "holder")))
	t.Cleanup(func() { _, _ = l.ForceUnlock(context.Background()) })
	r = relock(t, "--redis", url, "status", name)
	wantCode(t, r, 0)
	assert.Contains(t, r.stdout, holder.ID()+":holder", "status through the sentinels does not show the holder")
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
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
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
		require.NoError(t, err)
		writePEM(t, certPath, "CERTIFICATE", der)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		writePEM(t, keyPath, "PRIVATE KEY", keyDER)
	}
	issue(2, "localhost", x509.ExtKeyUsageServerAuth, []string{"localhost", "redis.test"}, f.serverCert, f.serverKey)
	issue(3, "relock test client", x509.ExtKeyUsageClientAuth, nil, f.clientCert, f.clientKey)
	return f
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return key
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
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
	require.NoError(t, err, "start redis-server with TLS")
	return nil, ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
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
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	name := "tls-lock"
	l := holder.GetLock(name)
	require.NoError(t, l.Lock(rlock.WithOwner(t.Context(), "holder")))
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
			assert.Contains(t, r.stdout, holder.ID()+":holder", "status over TLS does not show the holder")
		})
	}
}

func certPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
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
	assert.Equal(t, "ran\n", r.stdout, "stdout")

	r = relock(t, "--tls", "--cacert", f.ca, "--redis", addr, "status", "client-cert-lock")
	wantCode(t, r, exitUnavailable)
	t.Log(strings.TrimSpace(r.stderr))
	wantOneLine(t, r, addr, "--cert")
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := relock(t, args...)
		wantCode(t, r, 0)
		assert.True(t, strings.HasPrefix(r.stdout, "relock "), "relock %s printed %q", args[0], r.stdout)
		assert.Contains(t, r.stdout, "go1.", "relock %s", args[0])
		assert.Contains(t, r.stdout, "github.com/relock-go/relock", "relock %s", args[0])
		assert.Equal(t, 1, strings.Count(r.stdout, "\n"), "lines printed by relock %s: %q", args[0], r.stdout)
	}
}
