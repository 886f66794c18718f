package search

import (
	"fmt"
	"reflect"
	"testing"
)

func TestTokens(t *testing.T) {
	got := Tokens("mcp__pubchem__getCompoundByCID: Fetch the PDB2 entry")
	want := []string{"mcp", "pubchem", "get", "compound", "cid", "fetch", "pdb", "entry"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Tokens = %q, want %q", got, want)
	}
}

// synthetic makes n tools of a made-up catalogue, with one needle.
func synthetic(n int) []Doc {
	topics := []string{"weather", "calendar", "email", "invoice", "github", "slack", "spreadsheet", "translate", "image", "music"}
	verbs := []string{"list", "get", "create", "delete", "update", "search", "export", "import"}
	var docs []Doc
	for i := 0; i < n; i++ {
		topic, verb := topics[i%len(topics)], verbs[(i/len(topics))%len(verbs)]
		docs = append(docs, Doc{
			ID:          fmt.Sprintf("mcp__src%d__%s_%s_%d", i%7, verb, topic, i),
			Name:        fmt.Sprintf("src%d %s_%s_%d", i%7, verb, topic, i),
			Description: fmt.Sprintf("%s %s items for the user's account, page by page", verb, topic),
			ParamNames:  []string{"id", "page", "query"},
		})
	}
	docs[n/2] = Doc{
		ID: "mcp__chem__get_compound_by_cid", Name: "chem get_compound_by_cid",
		Description: "Fetch a PubChem compound record (formula, weight, SMILES) by its CID.",
		ParamNames:  []string{"cid"}, ParamText: []string{"PubChem compound identifier"},
	}
	return docs
}

func TestSearchFindsTheRightTool(t *testing.T) {
	ix := Build(synthetic(1000))
	for _, q := range []string{"pubchem compound", "molecular formula of a compound", "SMILES for CID 2244", "get compound"} {
		hits := ix.Search(q, 5)
		if len(hits) == 0 || hits[0].ID != "mcp__chem__get_compound_by_cid" {
			t.Errorf("query %q: top hit %v", q, hits)
		}
	}
	if hits := ix.Search("zzzz qqqq", 5); len(hits) != 0 {
		t.Errorf("unmatched query returned %v", hits)
	}
	if hits := ix.Search("weather", 20); len(hits) != 20 {
		t.Errorf("limit: %d hits", len(hits))
	}
}

func BenchmarkSearch1000(b *testing.B)  { benchSearch(b, 1000) }
func BenchmarkSearch10000(b *testing.B) { benchSearch(b, 10000) }

func benchSearch(b *testing.B, n int) {
	ix := Build(synthetic(n))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if h := ix.Search("pubchem compound formula", 5); len(h) == 0 {
			b.Fatal("no hit")
		}
	}
}
