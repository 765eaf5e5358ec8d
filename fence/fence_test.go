package fence_test

import (
	"errors"
	"testing"

	"github.com/relock-go/relock/fence"
	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestRegister(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	reg := fence.NewRegister(raw, "fence-test:"+t.Name())
	ctx := t.Context()
	t.Cleanup(func() { raw.Do(ctx, raw.B().Del().Key(reg.Key()).Build()) })

	if v, tok, err := reg.Read(ctx); err != nil || v != "" || tok != 0 {
		t.Fatalf("Read of a new register = %q, %d, %v", v, tok, err)
	}
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
		if s.stale != errors.Is(err, fence.ErrStaleToken) || (!s.stale && err != nil) {
			t.Errorf("Write(%d, %q) = %v, stale want %v", s.token, s.value, err, s.stale)
		}
	}
	if v, tok, err := reg.Read(ctx); err != nil || v != "d" || tok != 8 {
		t.Errorf("Read = %q, %d, %v, want d, 8", v, tok, err)
	}
}

func TestRegisterWrongType(t *testing.T) {
	srv := redistest.Shared(t)
	raw := srv.Client(t)
	key := "fence-test:" + t.Name()
	raw.Do(t.Context(), raw.B().Set().Key(key).Value("x").Build())
	t.Cleanup(func() { raw.Do(t.Context(), raw.B().Del().Key(key).Build()) })
	err := fence.NewRegister(raw, key).Write(t.Context(), 1, "v")
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Errorf("Write to a string key = %v, want a Redis error", err)
	}
}
