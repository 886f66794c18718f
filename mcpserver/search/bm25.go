// Package search ranks tool definitions for tool_search with BM25 over their
// names, descriptions and parameter names and descriptions.
package search

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters (the usual values).
const (
	k1 = 1.2
	b  = 0.75
)

// Field weights: a query word in a tool's name says more than one in its
// description.
const (
	WeightName      = 3
	WeightParamName = 2
	WeightText      = 1
)

// Doc is one searchable tool.
type Doc struct {
	ID          string // the exposed tool name
	Name        string // words of the name (source and tool)
	Description string
	ParamNames  []string
	ParamText   []string // parameter descriptions
}

type posting struct {
	doc int
	tf  float64
}

// Index is an immutable BM25 index.
type Index struct {
	ids    []string
	lens   []float64
	avgLen float64
	post   map[string][]posting
}

// Hit is one ranked result.
type Hit struct {
	ID    string
	Score float64
}

// Build indexes docs.
func Build(docs []Doc) *Index {
	ix := &Index{ids: make([]string, len(docs)), lens: make([]float64, len(docs)), post: map[string][]posting{}}
	var total float64
	for i, d := range docs {
		ix.ids[i] = d.ID
		tf := map[string]float64{}
		add := func(text string, w float64) {
			for _, t := range Tokens(text) {
				tf[t] += w
			}
		}
		add(d.Name, WeightName)
		add(d.Description, WeightText)
		for _, p := range d.ParamNames {
			add(p, WeightParamName)
		}
		for _, p := range d.ParamText {
			add(p, WeightText)
		}
		var l float64
		for t, n := range tf {
			ix.post[t] = append(ix.post[t], posting{doc: i, tf: n})
			l += n
		}
		ix.lens[i] = l
		total += l
	}
	if len(docs) > 0 {
		ix.avgLen = total / float64(len(docs))
	}
	return ix
}

// Len returns the number of indexed docs.
func (ix *Index) Len() int { return len(ix.ids) }

// Search returns the best limit docs for the query, best first; docs that
// match no query word are not returned. Ties keep index order.
func (ix *Index) Search(query string, limit int) []Hit {
	if ix == nil || len(ix.ids) == 0 || limit <= 0 {
		return nil
	}
	scores := map[int]float64{}
	n := float64(len(ix.ids))
	seen := map[string]bool{}
	for _, t := range Tokens(query) {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.post[t]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			norm := p.tf * (k1 + 1) / (p.tf + k1*(1-b+b*ix.lens[p.doc]/ix.avgLen))
			scores[p.doc] += idf * norm
		}
	}
	hits := make([]Hit, 0, len(scores))
	order := make([]int, 0, len(scores))
	for d := range scores {
		order = append(order, d)
	}
	sort.Slice(order, func(i, j int) bool {
		si, sj := scores[order[i]], scores[order[j]]
		if si != sj {
			return si > sj
		}
		return order[i] < order[j]
	})
	for _, d := range order {
		if len(hits) == limit {
			break
		}
		hits = append(hits, Hit{ID: ix.ids[d], Score: scores[d]})
	}
	return hits
}

// Tokens splits text into lower-case words: on anything that is not a letter
// or digit, between a lower-case letter and an upper-case one (camelCase),
// and between letters and digits. Words of one character are dropped, and a
// few English stop words.
func Tokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 1 {
			w := strings.ToLower(string(cur))
			if !stop[w] {
				out = append(out, w)
			}
		}
		cur = cur[:0]
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if len(cur) > 0 && ((unicode.IsUpper(r) && unicode.IsLower(prev)) || unicode.IsDigit(r) != unicode.IsDigit(prev)) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

var stop = map[string]bool{
	"the": true, "and": true, "or": true, "of": true, "to": true, "in": true, "for": true, "on": true, "with": true,
	"an": true, "is": true, "by": true, "at": true, "be": true, "this": true, "that": true, "it": true, "from": true, "as": true,
}
