package waitrec

import "testing"

func TestRoundTrip(t *testing.T) {
	r := Record{Owner: "c1:o\"1", Name: "orders:{7}", Kind: "fair"}
	enc := Record{Owner: r.Owner, Name: r.Name, Kind: r.Kind, Since: 1700000000123}.Encode()
	got, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	r.Since = 1700000000123
	if got != r {
		t.Fatalf("got %+v, want %+v", got, r)
	}
	// A record written without Since and stamped as the script does.
	got, err = Decode(Stamp(Record{Owner: r.Owner, Name: r.Name, Kind: r.Kind}.Encode(), 1700000000123))
	if err != nil || got != r {
		t.Fatalf("stamped: got %+v, %v", got, err)
	}
	if _, err := Decode(`{"owner":"x"}`); err == nil {
		t.Fatal("a record without name and kind decoded")
	}
}

func TestKeys(t *testing.T) {
	k := Key("app1:", "0b5c")
	if k != "app1:relock_waits:{0b5c}" {
		t.Fatal(k)
	}
	if id, ok := ClientID("app1:", k); !ok || id != "0b5c" {
		t.Fatal(id, ok)
	}
	if _, ok := ClientID("", k); ok {
		t.Fatal("a prefixed key read without its prefix")
	}
	if p := Pattern("a*["); p != `a\*\[relock_waits:{*}` {
		t.Fatal(p)
	}
}
