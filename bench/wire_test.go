package main

import (
	"maps"
	"testing"
)

func TestRespScannerSplitAnywhere(t *testing.T) {
	stream := "*3\r\n$7\r\nEVALSHA\r\n$1\r\nx\r\n$0\r\n\r\n" +
		"*1\r\n$4\r\nPING\r\n" +
		"*2\r\n$40\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n$2\r\n\r\n\r\n" +
		"*2\r\n$7\r\nevalsha\r\n$3\r\n*2\r\r\n"
	want := map[string]int64{"evalsha": 2, "ping": 1, "aaaaaaaaaaaaaaaaaaaaaaaa": 1}
	for cut := range len(stream) + 1 {
		w := newWire()
		var sc respScanner
		sc.scan([]byte(stream[:cut]), w)
		sc.scan([]byte(stream[cut:]), w)
		got := w.snap()
		if got.Cmds != 4 {
			t.Fatalf("cut at %d: commands = %d, want 4", cut, got.Cmds)
		}
		if !maps.Equal(got.ByName, want) {
			t.Fatalf("cut at %d: by name = %v, want %v", cut, got.ByName, want)
		}
	}
}
