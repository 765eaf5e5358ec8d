package main

import (
	"bytes"
	"os"
	"testing"
)

// TestUpToDate: the forwarders in the kinds' packages are those that
// handle's methods make now (run go generate ./handle after changing one).
func TestUpToDate(t *testing.T) {
	files, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no file generated")
	}
	for path, want := range files {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (run go generate ./handle)", path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./handle", path)
		}
	}
}
