package ui

import "time"

// SetClock sets the clock of cfg's limits (failed logins, lockouts).
func SetClock(cfg *Config, now func() time.Time) { cfg.now = now }

// LowerHashCost lets the tests' password hashes be cheap (bcrypt's
// minimum cost), until the returned function restores the minimum.
func LowerHashCost() func() {
	minHashCost = 4
	return func() { minHashCost = MinHashCost }
}
