// Command example runs workers that contend for a few locks and serves
// their metrics in Prometheus' format, through relockotel and
// OpenTelemetry's Prometheus exporter:
//
//	go run ./example --redis 127.0.0.1:6379 --listen 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep '^relock_'
//
// Each worker picks a lock at random, waits for it up to --wait (so some
// acquisitions end not_acquired), holds it for about --hold, and releases
// it. Every seventh hold lasts ten times longer, long enough for the
// watchdog to renew it; every tenth is taken on a fixed lease shorter than
// the hold, so it is lost (its Unlock finds it gone). Stop it with Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/relock-go/relock/relockotel"
	"github.com/relock-go/relock/rlock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("RELOCK_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	redisAddr := flag.String("redis", addr, "Redis address (default $RELOCK_REDIS or 127.0.0.1:6379)")
	listen := flag.String("listen", "127.0.0.1:9464", "address to serve /metrics on")
	workers := flag.Int("workers", 8, "contending workers")
	locks := flag.Int("locks", 2, "locks they contend for")
	hold := flag.Duration("hold", 20*time.Millisecond, "mean time a worker holds a lock")
	wait := flag.Duration("wait", 50*time.Millisecond, "how long a worker waits for a lock")
	watchdog := flag.Duration("watchdog", 300*time.Millisecond, "watchdog lease (renewed every third of it)")
	names := flag.Bool("names", false, "add relock.lock.name to the points (relockotel.WithLockNames)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The exporter is a metric reader that registers with Prometheus'
	// default registry, which promhttp.Handler serves.
	exporter, err := prometheus.New(prometheus.WithoutScopeInfo())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	opts := []relockotel.Option{relockotel.WithMeterProvider(mp)}
	if *names {
		// A handful of fixed names: safe to put them on the points.
		opts = append(opts, relockotel.WithLockNames())
	}
	obs := relockotel.New(opts...)
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{*redisAddr}},
		rlock.WithObserver(obs), rlock.WithWatchdogTimeout(*watchdog),
		rlock.WithLogger(slog.Default()))
	if err != nil {
		return err
	}
	defer c.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.Handler()}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	slog.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")

	var wg sync.WaitGroup
	for i := range *workers {
		owner := rlock.WithOwner(ctx, "worker-"+strconv.Itoa(i))
		wg.Go(func() { work(owner, c, *locks, *hold, *wait) })
	}
	wg.Wait()
	return nil
}

// work takes and releases locks until ctx ends.
func work(ctx context.Context, c *rlock.Client, locks int, hold, wait time.Duration) {
	for n := 1; ctx.Err() == nil; n++ {
		l := c.GetLock("example:resource:" + strconv.Itoa(rand.N(locks)))
		lease, held := time.Duration(0), hold/2+rand.N(hold+1) // the watchdog's lease
		switch {
		case n%10 == 0:
			lease = hold / 4 // shorter than the hold: this one is lost
		case n%7 == 0:
			held *= 10 // renewed by the watchdog
		}
		ok, err := l.TryLock(ctx, wait, lease)
		if err != nil || !ok {
			if err != nil && !errors.Is(err, context.Canceled) {
				slog.Warn("TryLock", "err", err)
			}
			pause(ctx, hold)
			continue
		}
		pause(ctx, held)
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, rlock.ErrNotHeld) {
			slog.Warn("Unlock", "err", err)
		}
		pause(ctx, hold/4)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
