package lsp

import (
	"context"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/aml-go/aml/starlib/analysis"
)

// formatting answers textDocument/formatting through buildtools: the
// changed lines as edits (none when the document is formatted).
func formatting(_ context.Context, _ *server, r *request, _ *protocol.DocumentFormattingParams, d *document) (any, error) {
	return formatEdits(d, -1, -1, r.snap.utf8)
}

// rangeFormatting answers textDocument/rangeFormatting: the edits of the
// whole-document formatting that touch the range's lines.
func rangeFormatting(_ context.Context, _ *server, r *request, p *protocol.DocumentRangeFormattingParams, d *document) (any, error) {
	if int(p.Range.Start.Line) >= d.lines.Count() {
		return nil, invalidParams("range %d:%d-%d:%d is outside the document, which has %d lines", p.Range.Start.Line, p.Range.Start.Character, p.Range.End.Line, p.Range.End.Character, d.lines.Count())
	}
	return formatEdits(d, int(p.Range.Start.Line), int(p.Range.End.Line), r.snap.utf8)
}

// formatEdits diffs the document against its formatting by lines and
// returns one edit per changed block; with first >= 0, only the blocks
// that overlap lines [first, last] (0-based). The diff takes time linear
// in the document's length (lineDiff).
func formatEdits(d *document, first, last int, utf8Units bool) ([]protocol.TextEdit, error) {
	out, err := analysis.Format(d.path, d.text)
	if err != nil {
		return nil, jsonrpc2.NewError(jsonrpc2.InvalidRequest, "cannot format: "+err.Error())
	}
	a := splitLines(string(d.text))
	b := splitLines(string(out))
	edits := []protocol.TextEdit{}
	var ld lineDiff
	for _, h := range ld.diff(a, b) {
		if first >= 0 && (h.i2 <= first && h.i1 != h.i2 || h.i1 > last) {
			continue
		}
		start, end := linePos(d, a, h.i1, utf8Units), linePos(d, a, h.i2, utf8Units)
		edits = append(edits, protocol.TextEdit{Range: protocol.Range{Start: start, End: end}, NewText: strings.Join(b[h.j1:h.j2], "")})
	}
	return edits, nil
}

// A hunk replaces lines [i1, i2) of the old text by lines [j1, j2) of the
// new one.
type hunk struct{ i1, i2, j1, j2 int }

// lineDiff computes the changed blocks between two texts' lines in time
// linear in their length, for a formatter's output, which keeps the order
// of lines and changes few of them:
//
//   - lines equal at the start and the end of a range are kept;
//   - lines that occur once in each side of a range are anchors kept in
//     the longest increasing sequence of their positions (patience diff);
//     the ranges between anchors are diffed again, to a fixed depth, so
//     that the work of each level is linear;
//   - what remains is diffed with Myers' algorithm, up to maxEdits lines
//     of difference, and replaced as a whole beyond that.
//
// The result is correct whatever the input (applying the hunks to the old
// lines gives the new ones) and minimal for what formatting changes; it is
// not always minimal for arbitrary texts.
type lineDiff struct {
	x, y    []int32 // the lines of each side, as small integers
	matches []int   // pairs of equal line indexes (i, j), increasing
	ops     int     // steps taken, for the tests of linearity
}

const (
	diffDepth = 4  // levels of anchoring
	maxEdits  = 64 // Myers' bound on the lines of difference of a range
)

// diff returns the hunks that turn a into b, in order.
func (ld *lineDiff) diff(a, b []string) []hunk {
	ids := make(map[string]int32, len(a))
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		ld.ops += len(lines)
		return out
	}
	ld.x, ld.y = intern(a), intern(b)
	ld.matches = ld.matches[:0]
	ld.diffRange(0, len(a), 0, len(b), diffDepth)
	var hunks []hunk
	pi, pj := 0, 0
	for k := 0; k < len(ld.matches); k += 2 {
		i, j := ld.matches[k], ld.matches[k+1]
		if i > pi || j > pj {
			hunks = append(hunks, hunk{pi, i, pj, j})
		}
		pi, pj = i+1, j+1
	}
	if pi < len(a) || pj < len(b) {
		hunks = append(hunks, hunk{pi, len(a), pj, len(b)})
	}
	return hunks
}

func (ld *lineDiff) match(i, j int) { ld.matches = append(ld.matches, i, j) }

// diffRange records the matches between x[i1:i2] and y[j1:j2].
func (ld *lineDiff) diffRange(i1, i2, j1, j2, depth int) {
	x, y := ld.x, ld.y
	for i1 < i2 && j1 < j2 && x[i1] == y[j1] {
		ld.match(i1, j1)
		i1, j1 = i1+1, j1+1
		ld.ops++
	}
	e2 := i2 // the equal suffix [i2, e2), recorded last
	for i1 < i2 && j1 < j2 && x[i2-1] == y[j2-1] {
		i2, j2 = i2-1, j2-1
		ld.ops++
	}
	switch {
	case i1 == i2 || j1 == j2:
		// only insertions or only deletions
	case depth > 0 && ld.anchored(i1, i2, j1, j2, depth):
	default:
		ld.myers(i1, i2, j1, j2)
	}
	for k := i2; k < e2; k++ {
		ld.match(k, j2+k-i2)
	}
}

// anchored matches the lines unique in both x[i1:i2] and y[j1:j2] that
// keep their order and diffs the ranges between them; it reports false
// when there are none.
func (ld *lineDiff) anchored(i1, i2, j1, j2, depth int) bool {
	type count struct{ na, nb, i, j int }
	counts := make(map[int32]*count, i2-i1)
	for i := i1; i < i2; i++ {
		c := counts[ld.x[i]]
		if c == nil {
			c = &count{}
			counts[ld.x[i]] = c
		}
		c.na++
		c.i = i
	}
	for j := j1; j < j2; j++ {
		if c := counts[ld.y[j]]; c != nil {
			c.nb++
			c.j = j
		}
	}
	ld.ops += i2 - i1 + j2 - j1
	// The unique lines in the order of x, then the longest sequence of
	// them increasing in y (patience sorting: piles hold the index of
	// their top card, prev links each card to the top of the pile
	// before).
	var cand []int // indexes into x
	for i := i1; i < i2; i++ {
		if c := counts[ld.x[i]]; c.na == 1 && c.nb == 1 {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return false
	}
	jOf := func(i int) int { return counts[ld.x[i]].j }
	piles := []int{}
	prev := make([]int, len(cand))
	for k, i := range cand {
		j := jOf(i)
		p := sort.Search(len(piles), func(p int) bool { return jOf(cand[piles[p]]) > j })
		ld.ops += 1 + bits.Len(uint(len(piles)))
		prev[k] = -1
		if p > 0 {
			prev[k] = piles[p-1]
		}
		if p == len(piles) {
			piles = append(piles, k)
		} else {
			piles[p] = k
		}
	}
	seq := make([]int, len(piles))
	for k, n := piles[len(piles)-1], len(piles)-1; k >= 0; k, n = prev[k], n-1 {
		seq[n] = cand[k]
	}
	pi, pj := i1, j1
	for _, i := range seq {
		j := jOf(i)
		ld.diffRange(pi, i, pj, j, depth-1)
		ld.match(i, j)
		pi, pj = i+1, j+1
	}
	ld.diffRange(pi, i2, pj, j2, depth-1)
	return true
}

// myers matches x[i1:i2] and y[j1:j2] by Myers' O((N+M)D) algorithm when
// they differ by at most maxEdits lines, and matches nothing otherwise
// (the range is replaced as a whole). trace[d] keeps the furthest x of
// each diagonal k in [-d, d] after step d.
func (ld *lineDiff) myers(i1, i2, j1, j2 int) {
	a, b := ld.x[i1:i2], ld.y[j1:j2]
	n, m := len(a), len(b)
	limit := min(n+m, maxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y, x0 := x-k, x
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			ld.ops += 1 + x - x0
		}
		trace = append(trace, slices.Clone(v[off-d:off+d+1]))
		ld.ops += 2*d + 1
		for k := -d; k <= d; k += 2 {
			if x := v[off+k]; x >= n && x-k >= m {
				ld.backtrack(trace, d, k, i1, j1)
				return
			}
		}
	}
}

// backtrack records the matches of the path that reaches diagonal k at
// step d, from its end back to the start.
func (ld *lineDiff) backtrack(trace [][]int, d, k, i1, j1 int) {
	start := len(ld.matches)
	x := trace[d][k+d]
	y := x - k
	for ; d > 0; d-- {
		prev := trace[d-1] // diagonals [-(d-1), d-1]
		at := func(k int) int { return prev[k+d-1] }
		var pk int
		if k == -d || k != d && at(k-1) < at(k+1) {
			pk = k + 1 // an insertion: y advanced
		} else {
			pk = k - 1 // a deletion: x advanced
		}
		px := at(pk)
		py := px - pk
		// The snake after the move, back to where the move ended.
		ex, ey := px, py+1
		if pk == k-1 {
			ex, ey = px+1, py
		}
		for x > ex && y > ey {
			x, y = x-1, y-1
			ld.matches = append(ld.matches, i1+x, j1+y)
		}
		x, y, k = px, py, pk
		ld.ops++
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		ld.matches = append(ld.matches, i1+x, j1+y)
	}
	// Recorded backwards: reverse the pairs.
	m := ld.matches[start:]
	for l, r := 0, len(m)-2; l < r; l, r = l+2, r-2 {
		m[l], m[r] = m[r], m[l]
		m[l+1], m[r+1] = m[r+1], m[l+1]
	}
}

// linePos is the start of line i of lines, or the end of the document
// for i == len(lines).
func linePos(d *document, lines []string, i int, utf8Units bool) protocol.Position {
	if i < len(lines) {
		return protocol.Position{Line: uint32(i)}
	}
	return offsetPos(d.lines, d.path, len(d.text), utf8Units)
}

// splitLines splits s into lines that keep their "\n".
func splitLines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
