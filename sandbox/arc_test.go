package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// arcTransform is a typical model-written ARC solution: flood fill,
// Counter, comprehensions.
const arcTransform = `from collections import Counter, deque

def neighbours(r, c, h, w):
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < h and 0 <= nc < w:
            yield nr, nc

def components(grid, background):
    h, w = len(grid), len(grid[0])
    seen = [[False] * w for _ in range(h)]
    out = []
    for r in range(h):
        for c in range(w):
            if seen[r][c] or grid[r][c] == background:
                continue
            colour, cells, queue = grid[r][c], [], deque([(r, c)])
            seen[r][c] = True
            while queue:
                cr, cc = queue.popleft()
                cells.append((cr, cc))
                for nr, nc in neighbours(cr, cc, h, w):
                    if not seen[nr][nc] and grid[nr][nc] == colour:
                        seen[nr][nc] = True
                        queue.append((nr, nc))
            out.append((colour, cells))
    return out

def transform(grid):
    counts = Counter(v for row in grid for v in row)
    background = counts.most_common(1)[0][0]
    objects = components(grid, background)
    largest = max((len(cells) for _, cells in objects), default=0)
    out = [[background for _ in row] for row in grid]
    for colour, cells in objects:
        paint = colour if len(cells) == largest else (colour % 9) + 1
        for r, c in cells:
            out[r][c] = paint
    return out
`

// arcGrid is a 30x30 grid with a few objects on a background.
func arcGrid() [][]int {
	g := make([][]int, 30)
	for r := range g {
		g[r] = make([]int, 30)
		for c := range g[r] {
			switch {
			case r >= 3 && r < 12 && c >= 4 && c < 15:
				g[r][c] = 3
			case (r*7+c*13)%11 == 0:
				g[r][c] = 5
			case r > 18 && c > 20 && (r+c)%2 == 0:
				g[r][c] = 2
			}
		}
	}
	return g
}

// python3 is the host's real python3 interpreter, or FLOWRUN_BENCH_PYTHON
// when set: a version manager's shim (pyenv's is a shell script) would add
// its own start-up to every call.
func python3(t testing.TB) string {
	t.Helper()
	name := "python3"
	if p := os.Getenv("FLOWRUN_BENCH_PYTHON"); p != "" {
		name = p
	}
	py, err := exec.LookPath(name)
	if err != nil {
		t.Skip("no python3 on this machine to compare with")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3 does not run: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// nativePython runs the transform in the host's python3.
func nativePython(t testing.TB, grid [][]int) any {
	t.Helper()
	py := python3(t)
	in, _ := json.Marshal(grid)
	cmd := exec.Command(py, "-c", arcTransform+"\nimport json, sys\nprint(json.dumps(transform(json.load(sys.stdin))))")
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("native python3: %v", err)
	}
	v, err := decodeJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestARCTransformMatchesNativePython(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	needPython(t, s)
	grid := arcGrid()
	want := nativePython(t, grid)
	res, err := s.Run(context.Background(), Request{Language: Python, Source: arcTransform, Call: "transform", Args: []any{grid}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("sandbox: %+v", res.Error)
	}
	if !reflect.DeepEqual(res.Result, want) {
		t.Fatalf("the sandbox's answer differs from native python3's")
	}
}
