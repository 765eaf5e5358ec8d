package relockotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/relockotel"
	"github.com/relock-go/relock/rlock"
)

// BenchmarkLockUnlock measures what the Observer adds to an uncontended
// Lock and Unlock: without an observer, with the metrics of an SDK
// MeterProvider (spans going to the global no-op TracerProvider), and
// with the spans of an SDK TracerProvider too.
func BenchmarkLockUnlock(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	defer mp.Shutdown(context.Background())
	defer tp.Shutdown(context.Background())
	for _, bc := range []struct {
		name string
		opts []rlock.Option
	}{
		{"off", nil},
		{"metrics", []rlock.Option{rlock.WithObserver(relockotel.New(relockotel.WithMeterProvider(mp)))}},
		{"metrics+spans", []rlock.Option{rlock.WithObserver(relockotel.New(relockotel.WithMeterProvider(mp),
			relockotel.WithTracerProvider(tp)))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := relocktest.Client(b, bc.opts...)
			l := c.GetLock(relocktest.Name(b))
			ctx := rlock.WithOwner(b.Context(), "bench")
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
