package fence_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fence"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestRegister(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	reg := fence.NewRegister(raw, "fence-test:"+t.Name())
	ctx := t.Context()
	// t.Context() has ended when clean-up runs: the DEL needs its own.
	t.Cleanup(func() { raw.Do(context.Background(), raw.B().Del().Key(reg.Key()).Build()) })

	v, tok, err := reg.Read(ctx)
	require.NoError(t, err, "Read of a new register")
	require.Empty(t, v, "Read of a new register: value")
	require.Zero(t, tok, "Read of a new register: token")
	steps := []struct {
		token int64
		value string
		stale bool
	}{
		{5, "a", false},
		{5, "b", false}, // the same hold may write again
		{7, "c", false},
		{6, "late", true},
		{1, "very late", true},
		{8, "d", false},
	}
	for _, s := range steps {
		err := reg.Write(ctx, s.token, s.value)
		if s.stale {
			assert.ErrorIs(t, err, fence.ErrStaleToken, "Write(%d, %q)", s.token, s.value)
		} else {
			assert.NoError(t, err, "Write(%d, %q)", s.token, s.value)
		}
	}
	v, tok, err = reg.Read(ctx)
	require.NoError(t, err, "Read")
	assert.Equal(t, "d", v, "Read: value")
	assert.EqualValues(t, 8, tok, "Read: token")
}

func TestRegisterWrongType(t *testing.T) {
	srv := redistest.Shared(t)
	raw := srv.Client(t)
	key := "fence-test:" + t.Name()
	raw.Do(t.Context(), raw.B().Set().Key(key).Value("x").Build())
	t.Cleanup(func() { raw.Do(context.Background(), raw.B().Del().Key(key).Build()) })
	err := fence.NewRegister(raw, key).Write(t.Context(), 1, "v")
	require.Error(t, err, "Write to a string key: want a Redis error")
	assert.NotErrorIs(t, err, fence.ErrStaleToken, "Write to a string key: want a Redis error")
}
