// Command tanimoto compares SciMesh's built-in tanimoto workload with
// RDKit's BulkTanimotoSimilarity on the same fingerprints, in the same run.
//
// It writes N 2048-bit fingerprints as the CSV "id,fingerprint" (Morgan
// fingerprints of RDKit's NCI sample, cycled, or random bits), times
// tanimoto.Run over the file on one core, times RDKit through
// rdkit_bench.py, checks that every score agrees to 1e-12, and prints the
// medians. See README.md for the commands.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scimesh/scimesh/internal/worker/tanimoto"
)

type config struct {
	n      int
	runs   int
	source string
	seed   uint64
	python string
	smiles string
	dir    string
	procs  int
	tol    float64
	script string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 200_000, "number of fingerprints")
	flag.IntVar(&c.runs, "runs", 5, "timed runs of each contestant; the median is reported")
	flag.StringVar(&c.source, "source", "morgan", `fingerprints: "morgan" (RDKit Morgan, radius 2, of the NCI sample, cycled) or "random" (each bit set with probability 1/2)`)
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the random fingerprints")
	flag.StringVar(&c.python, "python", "/usr/bin/python3", "the Python that has RDKit (Debian's python3-rdkit)")
	flag.StringVar(&c.smiles, "smiles", "/usr/share/RDKit/Data/NCI/first_5K.smi", "molecules for -source morgan (Debian's rdkit-data)")
	flag.StringVar(&c.dir, "dir", "", "directory for the CSV and the scores (default: a temporary one, removed at the end)")
	flag.IntVar(&c.procs, "procs", 1, "GOMAXPROCS while Go is timed: 1 measures one core, as RDKit runs on one")
	flag.Float64Var(&c.tol, "tolerance", 1e-12, "largest accepted difference between a Go and an RDKit score")
	flag.StringVar(&c.script, "script", defaultScript(), "the path of rdkit_bench.py")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "tanimoto bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.n < 1 || c.runs < 1 {
		return errors.New("-n and -runs must be at least 1")
	}
	if c.dir == "" {
		dir, err := os.MkdirTemp("", "tanimoto-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.dir = dir
	}
	csvPath := filepath.Join(c.dir, "fingerprints.csv")

	fmt.Fprintf(os.Stderr, "writing %d %s fingerprints to %s\n", c.n, c.source, csvPath)
	switch c.source {
	case "random":
		if err := writeRandom(csvPath, c.n, c.seed); err != nil {
			return err
		}
	case "morgan":
		if _, err := python(c, "morgan", "--smiles", c.smiles, "--n", strconv.Itoa(c.n), "--out", csvPath); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-source %q: want morgan or random", c.source)
	}
	ids, fps, err := readCSV(csvPath)
	if err != nil {
		return err
	}
	query := fps[0] // the first molecule: one score is 1
	info, _ := os.Stat(csvPath)

	fmt.Fprintf(os.Stderr, "timing Go, %d runs\n", c.runs)
	goRun, goOut, err := timeRun(c, csvPath, query)
	if err != nil {
		return err
	}
	goSim, simScores, err := timeSimilarity(c, fps, query)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "timing RDKit, %d runs each way\n", c.runs)
	scoresPath := filepath.Join(c.dir, "rdkit-scores.f64")
	out, err := python(c, "time", "--csv", csvPath, "--query", query, "--runs", strconv.Itoa(c.runs), "--scores", scoresPath)
	if err != nil {
		return err
	}
	var rd struct {
		Version           string `json:"rdkit_version"`
		Rows              int    `json:"rows"`
		WithConversion    timing `json:"with_conversion"`
		WithoutConversion timing `json:"without_conversion"`
	}
	if err := json.Unmarshal(out, &rd); err != nil {
		return fmt.Errorf("rdkit_bench.py printed %q: %w", out, err)
	}
	rdScores, err := readScores(scoresPath)
	if err != nil {
		return err
	}

	goScores, err := parseOutput(goOut, ids)
	if err != nil {
		return err
	}
	agree := compare(goScores, simScores, rdScores, fps, c.tol)

	n := float64(c.n)
	fmt.Printf("%d × 2048-bit fingerprints (%s), %.1f MB of CSV; median of %d runs; Go on GOMAXPROCS=%d\n",
		c.n, c.source, float64(info.Size())/1e6, c.runs, c.procs)
	fmt.Printf("%s %s/%s, RDKit %s, %s, %d CPUs, load average %s\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, rd.Version, cpuModel(), runtime.NumCPU(), loadAverage())
	fmt.Printf("| %-56s | %10s | %10s | %18s |\n", "contestant (one thread)", "wall", "CPU", "fingerprints/CPU-s")
	fmt.Printf("|%s|%s|%s|%s|\n", strings.Repeat("-", 58), strings.Repeat("-", 12), strings.Repeat("-", 12), strings.Repeat("-", 20))
	row := func(name string, t timing) {
		fmt.Printf("| %-56s | %7.1f ms | %7.1f ms | %18s |\n", name, t.Wall*1e3, t.CPU*1e3, group(n/t.CPU))
	}
	row("Go tanimoto.Run: CSV in, parse, score, CSV out", goRun)
	row("Go Similarity only, on decoded vectors", goSim)
	row("RDKit: read CSV, CreateFromFPSText, BulkTanimoto", rd.WithConversion)
	row("RDKit: BulkTanimotoSimilarity only, on ExplicitBitVects", rd.WithoutConversion)
	fmt.Printf("\nby CPU time: Go Run is %.1f× RDKit with conversion; Go Similarity is %.1f× RDKit's BulkTanimotoSimilarity\n",
		rd.WithConversion.CPU/goRun.CPU, rd.WithoutConversion.CPU/goSim.CPU)
	fmt.Println(agree.summary)
	if agree.bad > 0 {
		return fmt.Errorf("%d scores disagree", agree.bad)
	}
	return nil
}

// python runs rdkit_bench.py with args and returns its standard output.
func python(c config, args ...string) ([]byte, error) {
	cmd := exec.Command(c.python, append([]string{c.script}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s rdkit_bench.py %s: %w (is python3-rdkit installed? see README.md)", c.python, args[0], err)
	}
	return out, nil
}

// defaultScript returns the path of rdkit_bench.py next to this file's
// source, or relative to the repository root when the source path is not
// known (a binary built with -trimpath).
func defaultScript() string {
	if _, self, _, ok := runtime.Caller(0); ok && filepath.IsAbs(self) {
		return filepath.Join(filepath.Dir(self), "rdkit_bench.py")
	}
	return filepath.Join("bench", "tanimoto", "rdkit_bench.py")
}

// writeRandom writes n random 2048-bit fingerprints as id,fingerprint.
func writeRandom(path string, n int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(seed, 2048))
	fp := make([]byte, 256)
	hx := make([]byte, 512)
	w.WriteString("id,fingerprint\n")
	for i := range n {
		for j := 0; j < len(fp); j += 8 {
			binary.LittleEndian.PutUint64(fp[j:], rng.Uint64())
		}
		hex.Encode(hx, fp)
		fmt.Fprintf(w, "R%d,%s\n", i, hx)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readCSV reads the ids and fingerprints of the benchmark CSV.
func readCSV(path string) (ids, fps []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<20))
	r.ReuseRecord = true
	if _, err := r.Read(); err != nil {
		return nil, nil, fmt.Errorf("%s: header: %w", path, err)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, rec[0])
		fps = append(fps, rec[1])
	}
	if len(fps) == 0 {
		return nil, nil, fmt.Errorf("%s has no rows", path)
	}
	return ids, fps, nil
}

// timeRun times tanimoto.Run over the CSV file, reading it from disk each
// time (it is in the page cache, as RDKit's side reads it too), and returns
// the median seconds and the output of the last run.
func timeRun(c config, path, query string) (timing, []byte, error) {
	params, _ := json.Marshal(map[string]string{"query": query})
	var out bytes.Buffer
	var wall, cpu []float64
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
	for range c.runs {
		out.Reset()
		runtime.GC()
		f, err := os.Open(path)
		if err != nil {
			return timing{}, nil, err
		}
		sw := start()
		err = tanimoto.Run(context.Background(), params, true, f, &out)
		sw.stop(&wall, &cpu)
		f.Close()
		if err != nil {
			return timing{}, nil, err
		}
	}
	return medians(wall, cpu), out.Bytes(), nil
}

// timeSimilarity times tanimoto.Similarity alone over fingerprints decoded
// beforehand, the counterpart of BulkTanimotoSimilarity on ready
// ExplicitBitVects.
func timeSimilarity(c config, fps []string, query string) (timing, []float64, error) {
	q, err := tanimoto.DecodeHex(nil, []byte(query))
	if err != nil {
		return timing{}, nil, err
	}
	words := len(q)
	all := make([]uint64, 0, len(fps)*words)
	for i, fp := range fps {
		w, err := tanimoto.DecodeHex(nil, []byte(fp))
		if err != nil || len(w) != words {
			return timing{}, nil, fmt.Errorf("row %d: %v", i+1, err)
		}
		all = append(all, w...)
	}
	scores := make([]float64, len(fps))
	var wall, cpu []float64
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range c.runs {
		sw := start()
		for i := range scores {
			scores[i] = tanimoto.Similarity(all[i*words:(i+1)*words], q)
		}
		sw.stop(&wall, &cpu)
	}
	return medians(wall, cpu), scores, nil
}

// readScores reads the native float64s that rdkit_bench.py wrote.
func readScores(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := make([]float64, len(b)/8)
	for i := range s {
		s[i] = math.Float64frombits(binary.NativeEndian.Uint64(b[i*8:]))
	}
	return s, nil
}

// parseOutput reads Run's output and checks that its ids are the input's.
func parseOutput(out []byte, ids []string) ([]float64, error) {
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("the output of Run: %w", err)
	}
	if len(recs) != len(ids)+1 {
		return nil, fmt.Errorf("the output of Run has %d rows for %d fingerprints", len(recs)-1, len(ids))
	}
	scores := make([]float64, len(ids))
	for i, rec := range recs[1:] {
		if rec[0] != ids[i] {
			return nil, fmt.Errorf("row %d of the output of Run has id %q, want %q", i+1, rec[0], ids[i])
		}
		if scores[i], err = strconv.ParseFloat(rec[1], 64); err != nil {
			return nil, fmt.Errorf("row %d of the output of Run: %w", i+1, err)
		}
	}
	return scores, nil
}

// timing is the median wall-clock and CPU seconds of a contestant's runs.
type timing struct {
	Wall float64 `json:"wall_s"`
	CPU  float64 `json:"cpu_s"`
}

// stopwatch measures one run: wall-clock time, and the CPU time of the
// whole process (every thread, the garbage collector's included), which a
// busy machine inflates much less than wall-clock time.
type stopwatch struct {
	wall time.Time
	cpu  time.Duration
}

func start() stopwatch { return stopwatch{time.Now(), cpuTime()} }

func (s stopwatch) stop(wall, cpu *[]float64) {
	*wall = append(*wall, time.Since(s.wall).Seconds())
	*cpu = append(*cpu, (cpuTime() - s.cpu).Seconds())
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func medians(wall, cpu []float64) timing {
	return timing{Wall: median(wall), CPU: median(cpu)}
}

type agreement struct {
	bad     int
	summary string
}

// compare checks every score of Run's output against Similarity's and
// RDKit's. RDKit scores two empty fingerprints 1, SciMesh's contract 0:
// such pairs are counted apart.
func compare(run, sim, rd []float64, fps []string, tol float64) agreement {
	var a agreement
	if len(rd) != len(run) {
		a.bad = max(len(run), 1)
		a.summary = fmt.Sprintf("RDKit returned %d scores for %d fingerprints", len(rd), len(run))
		return a
	}
	var maxDiff float64
	exact, bothEmpty := 0, 0
	empty := func(s string) bool { return strings.Trim(s, "0") == "" }
	for i := range run {
		if run[i] != sim[i] {
			a.bad++
			continue
		}
		want := rd[i]
		if empty(fps[i]) && empty(fps[0]) {
			bothEmpty++
			if run[i] != 0 || want != 1 {
				a.bad++
			}
			continue
		}
		d := math.Abs(run[i] - want)
		maxDiff = max(maxDiff, d)
		if d > tol {
			a.bad++
		}
		if run[i] == want {
			exact++
		}
	}
	a.summary = fmt.Sprintf("agreement: %d of %d scores within %g of RDKit's (%d bit-identical, max |diff| %g, %d both-empty pairs: SciMesh 0, RDKit 1); %d disagree",
		len(run)-a.bad, len(run), tol, exact, maxDiff, bothEmpty, a.bad)
	return a
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// group writes an integer with thin thousands separators.
func group(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// loadAverage returns the 1-, 5- and 15-minute load averages, on Linux: a
// busy machine slows every contestant.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the CPU's model name, on Linux.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "unknown CPU"
}
