-- rate_available.lua (after rate_window.lua): the permits a rate limiter
-- has left in its window.
-- KEYS as rate_window.lua
-- Returns {1, available, 0}; {-1, 0, 0} when the limiter has no rate.
-- Safe to resend.
keep()
return {1, available, 0}
