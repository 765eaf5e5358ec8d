//go:build race

package integration_test

func init() { relRace = true }
