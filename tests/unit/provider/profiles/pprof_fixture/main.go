// Command pprof-fixture writes the Go runtime's own CPU and heap profiles of a known workload, the
// fixtures the unit tests decode and compare with `go tool pprof` (see ../fixtures/README.md).
//
// The CPU workload: main.heavy spins -heavy units in its own body and then calls main.light, which
// recurses a few frames deep and spins -light units (one by default) at the bottom. So heavy's flat
// CPU is -heavy units to light's -light, heavy's cumulative CPU includes light's, and light's
// cumulative CPU counts each sample once though light is on its stack several times.
package main

import (
	"flag"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
)

// One unit of work: about 80 ms on a current CPU.
const unit = 60_000_000

// The loops write their results, and allocate keeps its slices, here so the compiler removes no work
// and the heap profile still holds the slices when it is written.
var (
	sink     uint64
	heapSink [][]byte
)

//go:noinline
func light(depth, units int) {
	if depth > 0 {
		light(depth-1, units)
		return
	}
	x := sink
	for i := 0; i < units*unit; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
}

//go:noinline
func heavy(units, lightUnits int) {
	x := sink
	for i := 0; i < units*unit; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
	light(3, lightUnits)
}

// allocate allocates 64 slices of 64 KiB (4 MiB) that stay in use.
//
//go:noinline
func allocate() {
	for i := 0; i < 64; i++ {
		heapSink = append(heapSink, make([]byte, 64<<10))
	}
}

func writeHeapProfile(path string) {
	allocate()
	runtime.GC() // the heap profile reports the heap as of the last collection
	heap, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.WriteHeapProfile(heap); err != nil {
		log.Fatal(err)
	}
	if err := heap.Close(); err != nil {
		log.Fatal(err)
	}
}

func main() {
	cpuPath := flag.String("cpu", "cpu.pb.gz", "where to write the CPU profile")
	heapPath := flag.String("heap", "", "where to write the heap profile (none when empty)")
	heavyUnits := flag.Int("heavy", 3, "units main.heavy spins in its own body")
	lightUnits := flag.Int("light", 1, "units main.light spins")
	rounds := flag.Int("rounds", 5, "how many times main.heavy runs")
	flag.Parse()
	// Every allocation sampled, so main.allocate's 4 MiB show exactly (the default samples one per
	// 512 KiB allocated); set first, as the runtime asks.
	runtime.MemProfileRate = 1

	cpu, err := os.Create(*cpuPath)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < *rounds; i++ {
		heavy(*heavyUnits, *lightUnits)
	}
	pprof.StopCPUProfile()
	if err := cpu.Close(); err != nil {
		log.Fatal(err)
	}
	if *heapPath != "" {
		writeHeapProfile(*heapPath)
	}
}
