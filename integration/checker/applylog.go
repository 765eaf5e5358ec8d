package checker

import (
	"errors"
	"strconv"
	"strings"
)

// ParseMonitorLine reads one line of Redis' MONITOR output, such as
//
//	1700000000.123456 [0 lua] "hset" "reg" "token" "5" "value" "p1-3"
//
// (with or without the leading '+' of a RESP simple string) and returns
// its command arguments, unquoted. The Lua lines show the commands a
// script ran, in the order the server ran them.
func ParseMonitorLine(line string) (args []string, err error) {
	line = strings.TrimPrefix(strings.TrimRight(line, "\r\n"), "+")
	end := strings.Index(line, "] ")
	if end < 0 {
		return nil, errors.New("checker: not a MONITOR line: " + line)
	}
	rest := line[end+2:]
	for rest != "" {
		if rest[0] == ' ' {
			rest = rest[1:]
			continue
		}
		if rest[0] != '"' {
			return nil, errors.New("checker: unquoted MONITOR argument: " + rest)
		}
		var b strings.Builder
		i := 1
		closed := false
		for i < len(rest) && !closed {
			c := rest[i]
			switch {
			case c == '"':
				closed = true
				i++
			case c == '\\' && i+1 < len(rest):
				switch e := rest[i+1]; e {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case 'a':
					b.WriteByte('\a')
				case 'b':
					b.WriteByte('\b')
				case 'x':
					if i+3 >= len(rest) {
						return nil, errors.New("checker: short \\x escape in MONITOR line")
					}
					v, err := strconv.ParseUint(rest[i+2:i+4], 16, 8)
					if err != nil {
						return nil, err
					}
					b.WriteByte(byte(v))
					i += 2
				default:
					b.WriteByte(e)
				}
				i += 2
			default:
				b.WriteByte(c)
				i++
			}
		}
		if !closed {
			return nil, errors.New("checker: unterminated MONITOR argument")
		}
		args = append(args, b.String())
		rest = rest[i:]
	}
	return args, nil
}

// RegisterWrite returns the write that args (a command from MONITOR)
// makes to the register at key: HSET key token <t> value <v>, whether sent
// by a client (fencing off) or run by the fenced-write script.
func RegisterWrite(args []string, key string) (Applied, bool) {
	if len(args) != 6 || !strings.EqualFold(args[0], "hset") || args[1] != key ||
		args[2] != "token" || args[4] != "value" {
		return Applied{}, false
	}
	t, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return Applied{}, false
	}
	return Applied{Token: t, Value: args[5]}, true
}
