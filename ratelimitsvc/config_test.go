package ratelimitsvc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

// TestEnvoyConfigs reads envoyproxy/ratelimit's own test configs: the ones
// its tests load are read, and each one its tests reject is rejected with
// a *ConfigError naming the file and, where there is one, the line.
func TestEnvoyConfigs(t *testing.T) {
	good := []string{"basic_config", "wildcard", "shadowmode_config", "share_threshold", "metadata", "config", "example",
		"merge_domain_key1", "merge_domain_key2"}
	for _, name := range good {
		if _, err := ratelimitsvc.LoadConfig("testdata/envoyproxy/" + name + ".yaml"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]string{
		"bad_limit_unit":      `:6:13: invalid rate limit unit "foo"`,
		"bad_yaml":            `:2: found unexpected end of stream`,
		"empty_domain":        `config file cannot have empty domain`,
		"empty_key":           `descriptor has empty key`,
		"duplicate_key":       `duplicate descriptor composite key "test-domain.key1_value1"`,
		"misspelled_key":      `:5:5: unknown key "ratelimit" in a descriptor`,
		"misspelled_key2":     `:7:7: unknown key "requestsperunit" in rate_limit`,
		"non_map_list":        `:3:5: a descriptor must be a mapping, not "a"`,
		"non_string_key":      `:1:1: unknown key "0.25" in the file`,
		"replaces_empty":      `should not have an empty replaces entry`,
		"replaces_self":       `replaces should not contain name of same descriptor`,
		"unlimited_with_unit": `:6:13: should not specify rate limit unit when unlimited (unit "day")`,
	}
	for name, want := range bad {
		file := "testdata/envoyproxy/" + name + ".yaml"
		_, err := ratelimitsvc.LoadConfig(file)
		var ce *ratelimitsvc.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ratelimitsvc.ErrInvalidConfig) {
			t.Errorf("%s: %v, want a *ConfigError", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), file+":") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q, want it to start with %q and hold %q", name, err, file+":", want)
		}
	}
	// Two files of one domain, as envoyproxy/ratelimit refuses them
	// unless it merges domains.
	_, err := ratelimitsvc.LoadConfig("testdata/envoyproxy/basic_config.yaml", "testdata/envoyproxy/duplicate_domain.yaml")
	if !errors.Is(err, ratelimitsvc.ErrInvalidConfig) || !strings.Contains(err.Error(), `duplicate domain "test-domain"`) {
		t.Errorf("a domain in two files: %v", err)
	}
}

// TestConfigErrors checks that each kind of bad config is refused with
// an error naming the file, the line, the column and the value, and, for
// a limit keyrate cannot enforce, the bound.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
		is               error
	}{
		{"rpu-not-a-number", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: lots\n",
			`f.yaml:6:26: requests_per_unit "lots" is not a whole number from 0 to 4294967295`, nil},
		{"rpu-negative", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
			`f.yaml:6:26: requests_per_unit "-1" is not a whole number`, nil},
		{"rpu-beyond-keyrate", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 500000\n",
			`f.yaml:6:26: 500000 per second: keyrate: invalid limit: Rate 500000 is too many for a fixed-window window of 1s: the state counts at most 131071`, keyrate.ErrInvalidLimit},
		{"unit-missing", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n",
			`f.yaml:5:7: invalid rate limit unit "" in rate_limit`, nil},
		{"algorithm-unknown", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: leaky\n",
			`f.yaml:7:18: keyrate: invalid limit: algorithm "leaky" is not one of token-bucket, fixed-window, sliding-window, sliding-log`, keyrate.ErrInvalidLimit},
		{"burst-on-window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      burst: 9\n",
			`f.yaml:7:7: burst applies to algorithm token-bucket only, not fixed-window`, nil},
		{"burst-zero", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: token-bucket\n      burst: 0\n",
			`f.yaml:8:14: burst 0 is below 1`, nil},
		{"window-bad-unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      windows:\n        - unit: fortnight\n          requests_per_unit: 9\n",
			`f.yaml:8:17: invalid rate limit unit "fortnight" in a window`, nil},
		{"window-unknown-key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      windows:\n        - unit: hour\n          requests: 9\n",
			`f.yaml:9:11: unknown key "requests" in a window`, nil},
		{"too-many-windows", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      windows:\n" + strings.Repeat("        - {unit: hour, requests_per_unit: 9}\n", 8),
			`f.yaml:8:9: 9 windows in one rule, more than the 8 keyrate enforces together`, nil},
		{"unlimited-windows", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      algorithm: token-bucket\n",
			`f.yaml:6:7: an unlimited rate_limit has no algorithm`, nil},
		{"bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n",
			`f.yaml:4:18: shadow_mode must be true or false, not "maybe"`, nil},
		{"share-no-wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
			`f.yaml:5:22: share_threshold can only be used with wildcard values (containing '*'), but found key "k_v"`, nil},
		{"duplicate-mapping-key", "domain: d\ndomain: e\n", `f.yaml:2:1: key "domain" appears twice in the file`, nil},
		{"two-documents", "domain: d\n---\ndomain: e\n", `f.yaml:2:1: a second YAML document`, nil},
		{"empty-file", "", `f.yaml: config file cannot have empty domain (the file is empty)`, nil},
		{"descriptors-not-list", "domain: d\ndescriptors: {key: k}\n", `f.yaml:2:14: descriptors must be a list, not a mapping`, nil},
		{"syntax", "domain: d\ndescriptors:\n  - key: [k\n", `f.yaml:`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ratelimitsvc.ParseConfig("f.yaml", []byte(c.yaml))
			if !errors.Is(err, ratelimitsvc.ErrInvalidConfig) {
				t.Fatalf("%v, want ErrInvalidConfig", err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%v, want it to wrap %v", err, c.is)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("\n got %q\nwant %q...", err, c.want)
			}
		})
	}
}

// TestConfigIgnoresMisplacedEnvoyKeys: envoyproxy/ratelimit checks keys
// against one list whatever their level, so a key of that list where it
// has no use (a unit beside a descriptor's key) is ignored, as there.
func TestConfigIgnoresMisplacedEnvoyKeys(t *testing.T) {
	c, err := ratelimitsvc.ParseConfig("f.yaml", []byte("domain: d\nunit: second\ndescriptors:\n  - key: k\n    requests_per_unit: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules()) != 0 {
		t.Fatalf("rules %v", c.Rules())
	}
}

// TestConfigKeyrateFields reads keyrate's own fields into the rule's
// windows and policy.
func TestConfigKeyrateFields(t *testing.T) {
	c, err := ratelimitsvc.ParseConfig("f.yaml", []byte(`
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 10
      algorithm: token-bucket
      burst: 20
      windows:
        - unit: hour
          requests_per_unit: 1000
          algorithm: sliding-window
        - unit: day
          requests_per_unit: 5000
`))
	if err != nil {
		t.Fatal(err)
	}
	rs := c.Rules()
	if len(rs) != 1 {
		t.Fatalf("rules %v", rs)
	}
	got := rs[0].Policy().String()
	want := `"api.user": 10 per 1s, burst 20; 1000 per 1h0m0s, sliding-window; 5000 per 24h0m0s, fixed-window`
	if got != want {
		t.Fatalf("policy\n got %s\nwant %s", got, want)
	}
	if rs[0].File != "f.yaml" || rs[0].Line != 5 {
		t.Errorf("rule at %s:%d", rs[0].File, rs[0].Line)
	}
}

// TestLoadConfigDirectory reads a directory's .yaml and .yml files, in
// name order, skipping others and dot files.
func TestLoadConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.yml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	writeFile(t, dir, "a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	writeFile(t, dir, ".hidden.yaml", "not: yaml: at all")
	writeFile(t, dir, "notes.txt", "not yaml")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := ratelimitsvc.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,b" {
		t.Fatalf("domains %s", got)
	}
	if rs := c.Rules(); rs[0].Domain != "a" || rs[1].Domain != "b" {
		t.Fatalf("rules out of order: %v, %v", rs[0].Path, rs[1].Path)
	}
	if _, err := ratelimitsvc.LoadConfig(t.TempDir()); !errors.Is(err, ratelimitsvc.ErrInvalidConfig) {
		t.Fatalf("an empty directory: %v", err)
	}
}

// TestConfigAliasBomb refuses a config whose aliases add more than
// MaxAliasNodes nodes (a "billion laughs": each level a list of ten
// references to the level below), naming the alias, rather than building
// millions of rules from a few kilobytes; a config that reuses a block by
// an alias, as configs do, is read.
func TestConfigAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: base\n    descriptors: &l0\n")
	for i := range 10 {
		fmt.Fprintf(&b, "      - {key: k%d, rate_limit: {unit: second, requests_per_unit: 1}}\n", i)
	}
	for l := 1; l <= 5; l++ {
		fmt.Fprintf(&b, "  - key: lvl%d\n    descriptors: &l%d\n", l, l)
		for i := range 10 {
			fmt.Fprintf(&b, "      - {key: k%d, descriptors: *l%d}\n", i, l-1)
		}
	}
	_, err := ratelimitsvc.ParseConfig("bomb.yaml", []byte(b.String()))
	var ce *ratelimitsvc.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ratelimitsvc.ErrInvalidConfig) {
		t.Fatalf("a %d-byte alias bomb: %v, want a *ConfigError", b.Len(), err)
	}
	if want := fmt.Sprintf("past the %d they may (MaxAliasNodes)", ratelimitsvc.MaxAliasNodes); ce.Line == 0 || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v: want the alias's line and %q", err, want)
	}

	c, err := ratelimitsvc.ParseConfig("reuse.yaml", []byte(`
domain: d
descriptors:
  - key: a
    rate_limit: &std {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: *std
  - key: tenant
    descriptors: &paths
      - {key: path, value: /x, rate_limit: *std}
      - {key: path, value: /y, rate_limit: *std}
  - key: org
    descriptors: *paths
`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Rules()); n != 6 {
		t.Fatalf("%d rules from a config reusing blocks, want 6", n)
	}
}

// TestConfigAliasCycle refuses an alias inside the node it names (YAML
// lets an anchor's own content refer to it), naming the alias, rather
// than following it for ever: the reader ran out of stack, a fatal
// error no recover catches, and the reader before it out of memory.
func TestConfigAliasCycle(t *testing.T) {
	for _, y := range []string{
		"domain: d\ndescriptors: &x [{key: a, descriptors: *x}]\n",
		"domain: d\ndescriptors:\n  - &x\n    key: a\n    descriptors:\n      - key: b\n        descriptors: [*x]\n",
	} {
		_, err := ratelimitsvc.ParseConfig("cycle.yaml", []byte(y))
		var ce *ratelimitsvc.ConfigError
		if !errors.As(err, &ce) || ce.Line == 0 || !strings.Contains(err.Error(), "the alias *x is inside the node it names") {
			t.Errorf("%q: %v, want a *ConfigError naming the alias", y, err)
		}
	}
}
