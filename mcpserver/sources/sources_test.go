package sources

import (
	"strings"
	"testing"
)

func TestExposedName(t *testing.T) {
	if got := ExposedName("pub chem", "get.compound/v2"); got != "mcp__pub_chem__get_compound_v2" {
		t.Fatalf("sanitize: %s", got)
	}
	exact := ExposedName("s", strings.Repeat("x", MaxToolName-len("mcp__s__")))
	if len(exact) != MaxToolName || strings.Contains(exact[len(exact)-9:], "_") {
		t.Fatalf("a name of exactly %d characters must stay whole: %s", MaxToolName, exact)
	}
	a := ExposedName("source", strings.Repeat("t", 80)+"a")
	b := ExposedName("source", strings.Repeat("t", 80)+"b")
	if len(a) != MaxToolName || len(b) != MaxToolName || a == b {
		t.Fatalf("long names: %s %s", a, b)
	}
	if a != ExposedName("source", strings.Repeat("t", 80)+"a") {
		t.Fatal("names must be stable")
	}
	// Two originals that sanitize alike stay apart once hashed only if long;
	// short ones may collide, which the registry reports and skips.
	if ExposedName("s", "a.b") != ExposedName("s", "a_b") {
		t.Fatal("sanitized short names are expected to coincide")
	}
}

func TestParse(t *testing.T) {
	good := `{"mcpServers":{"a":{"command":"x","args":["1"]},"b":{"type":"http","url":"https://h/mcp"},"c":{"url":"http://h/mcp"}},"workspace":"/w"}`
	cs, err := Parse([]byte(good))
	if err != nil || len(cs) != 3 || cs[0].Name != "a" || !cs[1].IsHTTP() || !cs[2].IsHTTP() {
		t.Fatalf("%v %+v", err, cs)
	}
	for _, bad := range []string{
		`{"mcpServers":{"x":{}}}`,
		`{"mcpServers":{"x":{"command":"a","url":"http://h"}}}`,
		`{"mcpServers":{"x":{"type":"http"}}}`,
		`{"mcpServers":{"x":{"url":"ftp://h"}}}`,
		`{"mcpServers":{"x":{"type":"sse","url":"http://h/sse"}}}`,
		`{"mcpServers":{"bad name!":{"command":"a"}}}`,
		`{"mcpServers": 7}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
