package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes read from the environment: a plain number of
// bytes, or a number with a KiB, MiB, GiB or TiB suffix.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *ByteSize) EnvDecode(v string) error {
	s := strings.TrimSpace(v)
	shift := uint(0)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = strings.TrimSpace(num), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("size %q: want a whole number of bytes, optionally with KiB, MiB, GiB or TiB", v)
	}
	if n > (1<<63-1)>>shift {
		return fmt.Errorf("size %q: too large", v)
	}
	*b = ByteSize(n << shift)
	return nil
}
