package table

import (
	"bytes"
	"encoding/csv"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPU(t *testing.T) {
	runtime.LockOSThread()
	for _, kind := range benchKinds {
		in := benchTable(kind)
		for _, impl := range []string{"normalize", "csv", "split"} {
			best := time.Hour
			for range 7 {
				c0 := threadCPU()
				switch impl {
				case "normalize":
					Normalize(io.Discard, bytes.NewReader(in))
				case "split":
					Split(bytes.NewReader(in), true, 10000)
				default:
					r := csv.NewReader(bytes.NewReader(in))
					r.ReuseRecord = true
					w := csv.NewWriter(io.Discard)
					for {
						rec, err := r.Read()
						if err != nil {
							break
						}
						w.Write(rec)
					}
					w.Flush()
				}
				if d := threadCPU() - c0; d < best {
					best = d
				}
			}
			t.Logf("%-17s %-10s %7.0f MB/s (thread CPU, best of 7)", kind, impl, float64(len(in))/best.Seconds()/1e6)
		}
	}
}
