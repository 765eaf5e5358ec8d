package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
)

// How every subcommand reaches Redis: the connection flags, which may come
// before the subcommand's name or after it, and the environment.

// fallbackRedis is the Redis address used when neither --redis nor
// $RELOCK_REDIS gives one.
const fallbackRedis = "127.0.0.1:6379"

// defaultPort is the port of an address given without one.
const defaultPort = "6379"

// dialTimeout bounds connecting to Redis, unless a URL's dial_timeout says
// otherwise.
const dialTimeout = 3 * time.Second

// Environment variables that hold a password (the first one set wins, after
// a password in the URL). REDISCLI_AUTH is redis-cli's.
var passwordVars = []string{"RELOCK_PASSWORD", "REDISCLI_AUTH"}

// connFlags are the connection flags, named as redis-cli names them. There
// is no password flag: a command line is visible to every user of the
// machine, so the password comes from the URL or the environment.
type connFlags struct {
	redis    string
	user     string
	tls      bool
	cacert   string
	cert     string
	key      string
	sni      string
	insecure bool
	// prefix is put before every name given (rlock.WithKeyPrefix).
	prefix string
}

// newConnFlags returns the flags' defaults: --redis from $RELOCK_REDIS.
func newConnFlags() *connFlags {
	c := &connFlags{redis: os.Getenv("RELOCK_REDIS"), prefix: os.Getenv("RELOCK_PREFIX")}
	if c.redis == "" {
		c.redis = fallbackRedis
	}
	return c
}

// connFlagNames are the names register adds, for the help text.
var connFlagNames = []string{"redis", "user", "tls", "cacert", "cert", "key", "sni", "insecure", "prefix"}

// register adds the connection flags to fs. Their defaults are c's current
// values, so flags given before the subcommand stay in force after it
// unless given again.
func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.redis, "redis", c.redis, "Redis server `ADDR|URL`: host[:port] (port 6379 when left out; "+
		"IPv6 in brackets), a comma-separated list of Cluster seed addresses, or a "+
		"redis://, rediss:// (TLS) or unix:// URL; default $RELOCK_REDIS, then "+fallbackRedis)
	fs.StringVar(&c.user, "user", c.user, "ACL user `NAME`; the password comes from the URL, "+
		"$RELOCK_PASSWORD or $REDISCLI_AUTH")
	fs.BoolVar(&c.tls, "tls", c.tls, "connect with TLS (implied by rediss:// and by the other TLS flags)")
	fs.StringVar(&c.cacert, "cacert", c.cacert, "verify the server against the CA certificates in `FILE` "+
		"(PEM); by default, against the system's")
	fs.StringVar(&c.cert, "cert", c.cert, "client certificate `FILE` (PEM), for a server that asks for one; needs --key")
	fs.StringVar(&c.key, "key", c.key, "private key `FILE` (PEM) of --cert")
	fs.StringVar(&c.sni, "sni", c.sni, "server `NAME` sent in TLS SNI and expected in the server's "+
		"certificate; by default the host dialled")
	fs.BoolVar(&c.insecure, "insecure", c.insecure, "do not verify the server's certificate")
	fs.StringVar(&c.prefix, "prefix", c.prefix, "put `P` before every lock name, as a Client made with "+
		"rlock.WithKeyPrefix (or Redisson's NameMapper that prepends P) does; default $RELOCK_PREFIX, else none")
}

// args are the flags that give c to another relock process, except --redis
// (see demo) and --prefix (the demo gives its workers the lock's whole
// name).
func (c *connFlags) args() []string {
	var a []string
	add := func(name, v string) {
		if v != "" {
			a = append(a, "--"+name, v)
		}
	}
	add("user", c.user)
	if c.tls {
		a = append(a, "--tls")
	}
	add("cacert", c.cacert)
	add("cert", c.cert)
	add("key", c.key)
	add("sni", c.sni)
	if c.insecure {
		a = append(a, "--insecure")
	}
	return a
}

// target is a resolved connection: the rueidis options, and how to name
// the server in messages.
type target struct {
	opt rueidis.ClientOption
	// where names the server for people: the address list, or the URL with
	// its password masked.
	where string
	// list is set when --redis gave more than one address.
	list bool
}

// resolve builds the connection that c and the environment (read through
// getenv) describe. Every password that relock could come to print (the
// URL's, the one it sends) is passed to secret first, so that messages,
// including resolve's own errors, can be masked. An error is the user's
// (exit 64).
func (c *connFlags) resolve(getenv func(string) string, secret func(string)) (*target, error) {
	spec := strings.TrimSpace(c.redis)
	if spec == "" {
		return nil, errors.New("--redis is empty")
	}
	var t target
	var urlPassword bool
	if scheme, _, isURL := strings.Cut(spec, "://"); isURL {
		secret(urlPasswordOf(spec))
		opt, err := rueidis.ParseURL(spec)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error repeats the whole URL
			}
			return nil, fmt.Errorf("--redis %s: %v", maskURL(spec), err)
		}
		u, _ := url.Parse(spec) // ParseURL parsed it
		t.opt, t.where = opt, u.Redacted()
		if u.User != nil {
			_, urlPassword = u.User.Password()
		}
		if scheme == "unix" && opt.InitAddress[0] == "" {
			return nil, fmt.Errorf("--redis %s: no socket path (write unix:///path/to/redis.sock)", t.where)
		}
		if scheme != "unix" {
			// ParseURL checks the addresses less than parseAddr does, and
			// gives an addr= without a port the URL's host.
			hosts := append([]string{u.Host}, u.Query()["addr"]...)
			for i, h := range hosts {
				if i == 0 && h == "" {
					continue // ParseURL's default, localhost:6379
				}
				addr, err := parseAddr(h)
				if err != nil {
					return nil, fmt.Errorf("--redis %s: %s: %v", t.where, h, err)
				}
				t.opt.InitAddress[i] = addr
			}
		}
	} else {
		addrs, err := parseAddrs(spec)
		if err != nil {
			return nil, err
		}
		t.opt.InitAddress, t.where = addrs, strings.Join(addrs, ",")
	}
	t.list = len(t.opt.InitAddress) > 1
	if t.opt.Sentinel.MasterSet != "" {
		t.where += " (Sentinel master set " + t.opt.Sentinel.MasterSet + ")"
	}

	if c.user != "" {
		if t.opt.Username != "" && t.opt.Username != c.user {
			return nil, fmt.Errorf("--user %s and the user %s in --redis differ; give one", c.user, t.opt.Username)
		}
		t.opt.Username = c.user
	}
	if !urlPassword {
		for _, v := range passwordVars {
			if pw := getenv(v); pw != "" {
				secret(pw)
				t.opt.Password = pw
				break
			}
		}
	}

	if err := c.setTLS(&t); err != nil {
		return nil, err
	}
	// Client-side caching stays off: relock reads lock state that other
	// clients change.
	t.opt.DisableCache = true
	if t.opt.Dialer.Timeout == 0 {
		t.opt.Dialer.Timeout = dialTimeout
	}
	if t.opt.Sentinel.MasterSet != "" {
		t.opt.Sentinel.Dialer = t.opt.Dialer
		if t.opt.TLSConfig != nil {
			t.opt.Sentinel.TLSConfig = t.opt.TLSConfig.Clone()
		}
	}
	return &t, nil
}

// setTLS adds the TLS flags to t.
func (c *connFlags) setTLS(t *target) error {
	unixSocket := t.opt.DialCtxFn != nil // ParseURL's dialer for unix://
	if !c.tls && t.opt.TLSConfig == nil && c.cacert == "" && c.cert == "" && c.key == "" && c.sni == "" && !c.insecure {
		return nil
	}
	if unixSocket {
		return errors.New("TLS flags do not apply to a unix:// socket")
	}
	if (c.cert == "") != (c.key == "") {
		return errors.New("--cert and --key go together: give both or neither")
	}
	cfg := t.opt.TLSConfig
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// An empty ServerName makes the TLS dialer take each address's host:
	// right for every node of a Cluster or a Sentinel setup. ParseURL sets
	// the first host; --sni fixes one name for all.
	cfg.ServerName = c.sni
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || c.insecure
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return fmt.Errorf("--cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--cacert %s: no PEM certificate in it", c.cacert)
		}
		cfg.RootCAs = pool
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return fmt.Errorf("--cert %s --key %s: %v", c.cert, c.key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	t.opt.TLSConfig = cfg
	return nil
}

// parseAddrs reads a comma-separated list of host[:port] addresses.
func parseAddrs(spec string) ([]string, error) {
	var addrs []string
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("--redis %s: empty address in the list", spec)
		}
		addr, err := parseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("--redis %s: %v", part, err)
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// parseAddr reads host[:port]: a name, an IPv4 address, or an IPv6 address
// in brackets ([::1]:6380, [::1]) or alone (::1). The port defaults to 6379.
func parseAddr(s string) (string, error) {
	host, port := s, defaultPort
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", errors.New("no ] after an IPv6 address")
		}
		host = s[1:end]
		switch rest := s[end+1:]; {
		case rest == "":
		case strings.HasPrefix(rest, ":"):
			port = rest[1:]
		default:
			return "", fmt.Errorf("unexpected %q after ]", rest)
		}
		if net.ParseIP(host) == nil {
			return "", fmt.Errorf("%q in brackets is not an IPv6 address", host)
		}
	case strings.Count(s, ":") > 1:
		if net.ParseIP(s) == nil {
			return "", errors.New("not an address: put an IPv6 address in brackets, as in [::1]:6379")
		}
	case strings.Contains(s, ":"):
		host, port, _ = strings.Cut(s, ":")
	}
	if host == "" {
		return "", errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}

// userinfo matches the user:password@ part of a URL.
var userinfo = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*:)([^@/?#]*)@`)

// urlPasswordOf is the password in a URL's userinfo, as written (so
// possibly percent-encoded), or "".
func urlPasswordOf(s string) string {
	if m := userinfo.FindStringSubmatch(s); m != nil {
		return m[2]
	}
	return ""
}

// maskURL replaces the password in a URL that may not parse.
func maskURL(s string) string {
	return userinfo.ReplaceAllString(s, "${1}xxxxx@")
}

// redactor masks secrets in text that relock prints.
type redactor struct {
	secrets []string
}

// add registers s (and its percent-encoded forms) as never to be printed.
func (r *redactor) add(s string) {
	if s == "" {
		return
	}
	forms := []string{s}
	if dec, err := url.PathUnescape(s); err == nil && dec != s {
		forms = append(forms, dec) // s came from a URL
	}
	for _, f := range forms {
		for _, v := range []string{f, url.PathEscape(f), url.QueryEscape(f), url.UserPassword("", f).String()[1:]} {
			if v != "" && !slices.Contains(r.secrets, v) {
				r.secrets = append(r.secrets, v)
			}
		}
	}
	// Longest first, so that a secret inside another is not half masked.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// mask returns text with every secret replaced.
func (r *redactor) mask(text string) string {
	text = maskURLsIn(text)
	for _, s := range r.secrets {
		text = strings.ReplaceAll(text, s, "xxxxx")
	}
	return text
}

// urlInText matches URLs with a password anywhere in a message.
var urlInText = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#\s"]*:)([^@/?#\s"]*)@`)

func maskURLsIn(text string) string {
	return urlInText.ReplaceAllString(text, "${1}xxxxx@")
}

// dial connects to t and checks that the server answers. The error is one
// line that names the server and, when it helps, says what to change.
func (t *target) dial() (rueidis.Client, error) {
	rdb, err := rueidis.NewClient(t.opt)
	if err != nil {
		return nil, t.failure(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opt.Dialer.Timeout+time.Second)
	defer cancel()
	if err := rdb.Do(ctx, rdb.B().Ping().Build()).Error(); err != nil {
		rdb.Close()
		return nil, t.failure(err)
	}
	return rdb, nil
}

// connError is the error for not being able to use the server at where:
// one line, with a hint when one helps.
type connError struct {
	where, hint string
	err         error
}

func (e *connError) Error() string {
	msg := fmt.Sprintf("cannot connect to Redis at %s: %s", e.where, shortRedisError(oneLine(e.err)))
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

func (e *connError) Unwrap() error { return e.err }

// unreachable reports whether err says that nothing answered at t at all
// (as opposed to a server that refused the password or the TLS handshake).
func (t *target) unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	// Without TLS, a dial that timed out; with it, the handshake may be
	// what timed out.
	return t.opt.TLSConfig == nil && errors.Is(err, context.DeadlineExceeded)
}

// failure is the error for not being able to use the server at t.
func (t *target) failure(err error) error {
	return &connError{where: t.where, hint: t.hint(oneLine(err)), err: err}
}

// hint says what to do about a connection error, when that is clear.
func (t *target) hint(msg string) string {
	tlsOn := t.opt.TLSConfig != nil
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(msg, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("NOAUTH"):
		return "the server wants a password: put it in $RELOCK_PASSWORD or $REDISCLI_AUTH, or in the URL"
	case has("WRONGPASS"):
		return "wrong password, or wrong --user"
	case has("without any password configured"):
		return "the server has no password: unset $RELOCK_PASSWORD and $REDISCLI_AUTH"
	case has("NOPERM"):
		return "the ACL user may not run the commands relock needs (EVALSHA, PUBLISH, SUBSCRIBE, ...)"
	case has("does not look like a TLS handshake"):
		return "the server does not speak TLS on that port"
	case has("unknown authority"):
		return "--cacert FILE names the CA that signed the server's certificate; --insecure skips the check"
	case has("x509:"):
		return "--sni NAME gives the name the server's certificate is for"
	case tlsOn && has("certificate required", "bad certificate", "connection reset by peer"):
		return "the server may want a client certificate: --cert FILE --key FILE"
	case t.list && has("cluster support disabled"):
		return "a list of addresses is for Redis Cluster; give a single server one address"
	case !tlsOn && (strings.HasSuffix(msg, "EOF") || has("connection reset by peer")):
		return "if the server expects TLS, add --tls or use rediss://"
	case tlsOn && has("deadline exceeded", "i/o timeout"):
		return "no TLS handshake: does the server speak TLS on that port?"
	}
	return ""
}

// shortRedisError drops the part of a long Redis error reply that only
// repeats what the hint says.
func shortRedisError(msg string) string {
	if strings.HasPrefix(msg, "NOAUTH ") {
		return "NOAUTH Authentication required"
	}
	return msg
}

// oneLine is err's message on one line (joined errors have several).
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// shortContext is a context for one request made on the way out (cleanup,
// a release), whatever happened to the caller's.
func shortContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// lockName is the name in Redis of the lock name given on the command
// line: --prefix, then name. It reports a bad prefix, an empty name, and a
// name that is not valid with its prefix.
func (c *connFlags) lockName(name string) (string, error) {
	if err := lockcore.CheckKeyPrefix(c.prefix); err != nil {
		return "", fmt.Errorf("--prefix: %w", err)
	}
	if name == "" || c.prefix == "" {
		return name, lockcore.CheckName(name)
	}
	if err := lockcore.CheckName(c.prefix + name); err != nil {
		return "", fmt.Errorf("with --prefix %q: %w", c.prefix, err)
	}
	return c.prefix + name, nil
}
