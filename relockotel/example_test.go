package relockotel_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/relockotel"
	"github.com/relock-go/relock/rlock"
)

func ExampleNew() {
	srv, err := redistest.SharedServer() // a throwaway redis-server
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	// A MeterProvider whose reader the example reads; a service passes its
	// own (an OTLP or Prometheus exporter), or none for the global one.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}},
		rlock.WithObserver(relockotel.New(relockotel.WithMeterProvider(mp))))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	l := c.GetLock("example:relockotel")
	if err := l.Lock(ctx); err != nil {
		panic(err)
	}
	if err := l.Unlock(ctx); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				kind, _ := dp.Attributes.Value(relockotel.AttrKind)
				outcome, _ := dp.Attributes.Value(relockotel.AttrOutcome)
				fmt.Printf("%s{kind=%s,outcome=%s}: %d\n", m.Name, kind.AsString(), outcome.AsString(), dp.Count)
			}
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				kind, _ := dp.Attributes.Value(relockotel.AttrKind)
				fmt.Printf("%s{kind=%s}: %d\n", m.Name, kind.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// relock.acquire.duration{kind=lock,outcome=acquired}: 1
	// relock.hold.duration{kind=lock,outcome=released}: 1
	// relock.holds.active{kind=lock}: 0
}

// ExampleNew_client is the README's code, compiled; it is not run.
func ExampleNew_client() {
	var opt rueidis.ClientOption
	// README begin
	obs := relockotel.New() // the global MeterProvider and TracerProvider; see WithMeterProvider, WithTracerProvider
	c, err := rlock.NewClient(opt, rlock.WithObserver(obs))
	// README end
	_, _ = c, err
}

// ExampleWithLockNameFunc is the operations page's code, compiled; it is
// not run.
func ExampleWithLockNameFunc() {
	// README begin
	obs := relockotel.New(relockotel.WithLockNameFunc(
		relockotel.LockNamePatterns("orders:*", "invoice:*:pdf"))) // orders:42 -> orders:*; a name that matches none -> other
	// README end
	_ = obs
}
