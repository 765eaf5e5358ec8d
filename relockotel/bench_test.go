package relockotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/relockotel"
	"github.com/relock-go/relock/rlock"
)

// BenchmarkLockUnlock measures what the Observer adds to an uncontended
// Lock and Unlock: without an observer; with the metrics of an SDK
// MeterProvider and the spans of the global TracerProvider (none set:
// its spans record nothing, but they are made); with a no-op
// TracerProvider given; and with the spans of an SDK TracerProvider.
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
		{"metrics+nooptracer", []rlock.Option{rlock.WithObserver(relockotel.New(relockotel.WithMeterProvider(mp),
			relockotel.WithTracerProvider(noop.NewTracerProvider())))}},
		{"metrics+spans", []rlock.Option{rlock.WithObserver(relockotel.New(relockotel.WithMeterProvider(mp),
			relockotel.WithTracerProvider(tp)))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := relocktest.Client(b, bc.opts...)
			l := c.GetLock(relocktest.Name(b))
			ctx := rlock.WithOwner(b.Context(), "bench")
			b.ReportAllocs()
			for b.Loop() {
				require.NoError(b, l.Lock(ctx))
				require.NoError(b, l.Unlock(ctx))
			}
		})
	}
}
