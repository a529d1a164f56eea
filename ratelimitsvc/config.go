package ratelimitsvc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"

	"github.com/keyrate/keyrate"
)

// Unit is a rate limit's time unit, as envoyproxy/ratelimit's config and
// Envoy's API name it.
type Unit = rlspb.RateLimitResponse_RateLimit_Unit

// UnitDuration returns the length of u's window, as envoyproxy/ratelimit
// counts it: a week is 7 days, a month 30 days, a year 365 days. It
// returns 0 for an unknown unit.
func UnitDuration(u Unit) time.Duration {
	switch u {
	case rlspb.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlspb.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlspb.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlspb.RateLimitResponse_RateLimit_DAY:
		return 24 * time.Hour
	case rlspb.RateLimitResponse_RateLimit_WEEK:
		return 7 * 24 * time.Hour
	case rlspb.RateLimitResponse_RateLimit_MONTH:
		return 30 * 24 * time.Hour
	case rlspb.RateLimitResponse_RateLimit_YEAR:
		return 365 * 24 * time.Hour
	}
	return 0
}

// Window is one limit of a rule: RequestsPerUnit per Unit, counted with
// Algorithm. envoyproxy/ratelimit's rate_limit block is one window of
// the fixed-window algorithm; keyrate's fields pick another algorithm, a
// burst, and add windows.
type Window struct {
	Unit            Unit
	RequestsPerUnit uint32
	// Algorithm is keyrate.FixedWindow unless the config names another.
	Algorithm keyrate.Algorithm
	// Burst is a token bucket's capacity; 0 means RequestsPerUnit. It is
	// 0 for every other algorithm.
	Burst int
}

// Limit returns the keyrate limit that enforces w. A window of 0
// requests per unit has none (every request is over it): Limit returns
// the zero Limit.
func (w Window) Limit() keyrate.Limit {
	if w.RequestsPerUnit == 0 {
		return keyrate.Limit{}
	}
	l := keyrate.Limit{Rate: int(w.RequestsPerUnit), Per: UnitDuration(w.Unit), Burst: int(w.RequestsPerUnit)}
	if w.Algorithm != keyrate.TokenBucket {
		return l.Using(w.Algorithm)
	}
	if w.Burst > 0 {
		l.Burst = w.Burst
	}
	return l
}

// Rule is a descriptor's rate_limit block: the limits that every
// request matching its descriptor path is decided under.
type Rule struct {
	// Domain is the config's domain.
	Domain string
	// Path is the rule's place in the config, as envoyproxy/ratelimit
	// names it in its statistics: the domain and each level's key (and
	// "_value" where the config gives one), joined by dots
	// ("messaging.message_type_marketing.to_number").
	Path string
	// Name and Replaces are the rate_limit block's name and replaces: a
	// rule that a request matches drops, from that request, every rule
	// whose Name it replaces.
	Name     string
	Replaces []string
	// Unlimited admits every request, counting none.
	Unlimited bool
	// ShadowMode decides as usual but answers OK; QuotaMode makes the
	// rule count towards the overall code only when every quota-mode
	// descriptor of the request is over its limit.
	ShadowMode, QuotaMode bool
	// DetailedMetric and ValueToMetric put the request's values in the
	// descriptor label of the metrics (bounded: see MaxDetailedLabels).
	DetailedMetric, ValueToMetric bool
	// Windows are the limits enforced together, all or nothing: the
	// rate_limit block's own first, then keyrate's windows. Empty for an
	// unlimited rule.
	Windows []Window
	// File and Line locate the rate_limit block.
	File string
	Line int

	policy string // the keyrate policy's name: see policyName
}

// denyAll reports whether a window of r admits nothing (0 requests per
// unit), so that every request is over the limit.
func (r *Rule) denyAll() bool {
	for _, w := range r.Windows {
		if w.RequestsPerUnit == 0 {
			return true
		}
	}
	return false
}

// Policy returns the keyrate policy that enforces r, named for its path
// (with '\' and '.' escaped by a '\' in the domain, keys and values, so
// that no two rules' names are alike).
// It is meaningless for an unlimited rule and for one that denies all.
func (r *Rule) Policy() keyrate.Policy {
	p := keyrate.Policy{Name: r.policy}
	for _, w := range r.Windows {
		p.Limits = append(p.Limits, w.Limit())
	}
	return p
}

// Config is a set of domains read from envoyproxy/ratelimit config files:
// what a Service decides requests by. It is immutable once read and safe
// for concurrent use.
type Config struct {
	domains map[string]*node
	rules   []*Rule
}

// Rules returns the config's rules (rate_limit blocks), in the order of
// the files and of each file.
func (c *Config) Rules() []*Rule { return slices.Clone(c.rules) }

// Domains returns the config's domains, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// node is one level of a domain's descriptor tree, as
// envoyproxy/ratelimit's rateLimitDescriptor: children by composite key
// ("key" or "key_value"), the wildcard children among them in config
// order, and the rule of the path that ends here.
type node struct {
	children        map[string]*node
	wildcards       []wildcard
	rule            *Rule
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string // the composite key, when shareThreshold
}

// wildcard is a child whose value holds '*': its composite key, split at
// each '*'.
type wildcard struct {
	key   string
	parts []string
}

// MaxConfigBytes bounds a config file's size.
const MaxConfigBytes = 16 << 20

// MaxAliasNodes bounds the YAML nodes that aliases add to a config
// file, each use of an alias counted as the nodes it names: a few
// kilobytes of anchors, each a list of references to the one before,
// would otherwise expand to millions of rules (a "billion laughs"). A
// config that reuses a block by an alias, as configs do, stays far below
// it.
const MaxAliasNodes = 1 << 20

// ParseConfig reads one file's contents, named name in errors. A file
// holds one domain, as envoyproxy/ratelimit reads it. Errors are
// *ConfigError, wrapping ErrInvalidConfig.
func ParseConfig(name string, data []byte) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	if err := c.add(name, data); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadConfig reads every path: a file, or a directory whose files ending
// in .yaml or .yml (not starting with a dot, not in subdirectories) it
// reads in name order. Each file holds one domain; two files of one
// domain are an error, as in envoyproxy/ratelimit by default. Errors are
// *ConfigError, wrapping ErrInvalidConfig, or the error of reading a
// file.
func LoadConfig(paths ...string) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				continue
			}
			files = append(files, filepath.Join(p, n))
		}
	}
	if len(files) == 0 {
		return nil, &ConfigError{File: strings.Join(paths, ", "), Msg: "no config file (a directory's files must end in .yaml or .yml)"}
	}
	for _, f := range files {
		data, err := readBounded(f)
		if err != nil {
			return nil, err
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readBounded reads a file of at most MaxConfigBytes.
func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{File: name, Msg: fmt.Sprintf("the file is larger than %d bytes", MaxConfigBytes)}
	}
	return data, nil
}

// policyName extends the name of a rule's keyrate policy by one level:
// prefix (empty at the domain) and the level's composite key, with '\'
// and '.' escaped in it. Without either, the name is the rule's Path; with
// them it still names one rule only (two paths read alike where a key
// holds a dot: "a.b" at the top and "a" then "b" are both "d.a.b"), so
// that the name of a rule's policy does not depend on the rules around
// it, and a reload that reorders them lends no rule another's limits.
func policyName(prefix, level string) string {
	if strings.ContainsAny(level, `\.`) {
		var b strings.Builder
		for _, c := range []byte(level) {
			if c == '\\' || c == '.' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		level = b.String()
	}
	if prefix == "" {
		return level
	}
	return prefix + "." + level
}

// envoyKeys are the keys envoyproxy/ratelimit accepts anywhere in a file
// (it checks them against one list, whatever the level). A key of this
// list where its level has no use for it is ignored, as there; any other
// key is an error.
var envoyKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true, "metadata": true,
}

// parser reads one file.
type parser struct {
	file string
	c    *Config
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	e := &ConfigError{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// add reads one file into c.
func (c *Config) add(name string, data []byte) error {
	p := &parser{file: name, c: c}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return p.yamlErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return p.errf(&extra, "a second YAML document: a file holds one domain (envoyproxy/ratelimit reads the first document only)")
	} else if !errors.Is(err, io.EOF) {
		return p.yamlErr(err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return p.errf(nil, "config file cannot have empty domain (the file is empty)")
	}
	if err := p.aliases(doc.Content[0]); err != nil {
		return err
	}
	return p.root(doc.Content[0])
}

// aliases checks the aliases under n: none may be inside the node it
// names (a cycle, which reading would follow for ever), and together
// they may add at most MaxAliasNodes nodes.
func (p *parser) aliases(n *yaml.Node) error {
	limit := literalNodes(n) + MaxAliasNodes
	_, at, cycle := expandedNodes(n, map[*yaml.Node]int{}, limit)
	switch {
	case cycle:
		return p.errf(at, "the alias *%s is inside the node it names", at.Value)
	case at != nil:
		return p.errf(at, "the alias *%s takes the nodes the file's aliases add past the %d they may (MaxAliasNodes)", at.Value, MaxAliasNodes)
	}
	return nil
}

// literalNodes counts the nodes written under n, an alias as one.
func literalNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += literalNodes(k)
	}
	return c
}

// expandedNodes counts n's nodes with every alias expanded where it is
// used, up to limit+1; sizes holds the count of each node already
// counted (0 while it is being counted), so that the work is linear in
// the file. It stops at an alias inside the node it names (cycle), or
// past limit at an alias that took the count there (there is one: the
// file's own nodes are fewer than limit).
func expandedNodes(n *yaml.Node, sizes map[*yaml.Node]int, limit int) (c int, at *yaml.Node, cycle bool) {
	if c, ok := sizes[n]; ok {
		return c, nil, false
	}
	sizes[n] = 0
	c = 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if done, ok := sizes[n.Alias]; ok && done == 0 {
			return c, n, true
		}
		a, at, cycle := expandedNodes(n.Alias, sizes, limit)
		if at != nil {
			return a, at, cycle
		}
		if c = a; c > limit {
			return c, n, false
		}
	}
	for _, k := range n.Content {
		kc, at, cycle := expandedNodes(k, sizes, limit)
		if at != nil {
			return c, at, cycle
		}
		if c += kc; c > limit {
			return c, firstAlias(n), false
		}
	}
	sizes[n] = c
	return c, nil, false
}

// firstAlias returns the first alias under n in document order.
func firstAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n
	}
	for _, k := range n.Content {
		if a := firstAlias(k); a != nil {
			return a
		}
	}
	return nil
}

// yamlErr converts a YAML syntax error to a *ConfigError at its line.
func (p *parser) yamlErr(err error) error {
	e := &ConfigError{File: p.file, Msg: err.Error(), Err: err}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
	}
	return e
}

// pair is a mapping's key and value nodes.
type pair struct{ k, v *yaml.Node }

// mapping returns n's pairs, or an error if n is not a mapping, holds a
// key twice, or holds a key that is neither allowed here nor one of
// envoyproxy/ratelimit's (which are ignored where they have no use).
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]pair, error) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s must be a mapping, not %s", what, describe(n))
	}
	m := make(map[string]pair, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errf(k, "a key of %s must be a string, not %s", what, describe(k))
		}
		if _, dup := m[k.Value]; dup {
			return nil, p.errf(k, "key %q appears twice in %s", k.Value, what)
		}
		if !slices.Contains(allowed, k.Value) {
			if envoyKeys[k.Value] {
				continue // ignored here, as envoyproxy/ratelimit ignores it
			}
			return nil, p.errf(k, "unknown key %q in %s (known: %s)", k.Value, what, strings.Join(allowed, ", "))
		}
		m[k.Value] = pair{k, v}
	}
	return m, nil
}

// deref follows an alias.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names a node's kind for an error.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected node"
}

// str reads a scalar as a string.
func (p *parser) str(pr pair) (string, error) {
	v := deref(pr.v)
	if v.Kind != yaml.ScalarNode {
		return "", p.errf(v, "%s must be a string, not %s", pr.k.Value, describe(v))
	}
	if v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

// boolean reads a scalar as YAML 1.1 reads a boolean (true, yes, on...),
// as envoyproxy/ratelimit's YAML library does.
func (p *parser) boolean(pr pair) (bool, error) {
	v := deref(pr.v)
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "y", "on":
			return true, nil
		case "false", "no", "n", "off", "", "~", "null":
			return false, nil
		}
	}
	return false, p.errf(v, "%s must be true or false, not %s", pr.k.Value, describe(v))
}

// uint reads a scalar as a whole number from 0 to max.
func (p *parser) uint(pr pair, max uint64) (uint64, error) {
	v := deref(pr.v)
	if v.Kind == yaml.ScalarNode && v.Tag != "!!str" {
		if n, err := strconv.ParseUint(v.Value, 0, 64); err == nil && n <= max {
			return n, nil
		}
	}
	return 0, p.errf(v, "%s %s is not a whole number from 0 to %d", pr.k.Value, describe(v), max)
}

// list returns a sequence's items.
func (p *parser) list(pr pair) ([]*yaml.Node, error) {
	v := deref(pr.v)
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, p.errf(v, "%s must be a list, not %s", pr.k.Value, describe(v))
	}
	return v.Content, nil
}

// root reads a file's top level: its domain and descriptors.
func (p *parser) root(n *yaml.Node) error {
	m, err := p.mapping(n, "the file", "domain", "descriptors")
	if err != nil {
		return err
	}
	var domain string
	if pr, ok := m["domain"]; ok {
		if domain, err = p.str(pr); err != nil {
			return err
		}
	}
	if domain == "" {
		return p.errf(deref(n), "config file cannot have empty domain")
	}
	if _, dup := p.c.domains[domain]; dup {
		return p.errf(deref(m["domain"].v), "duplicate domain %q (another file defines it)", domain)
	}
	root := &node{children: map[string]*node{}}
	if pr, ok := m["descriptors"]; ok {
		if err := p.descriptors(root, domain, domain+".", policyName("", domain), pr); err != nil {
			return err
		}
	}
	p.c.domains[domain] = root
	return nil
}

// descriptors reads a descriptor list into parent, whose path (for rule
// paths) is prefix and whose policy name (see policyName) is polPrefix.
func (p *parser) descriptors(parent *node, domain, prefix, polPrefix string, pr pair) error {
	items, err := p.list(pr)
	if err != nil {
		return err
	}
	for _, item := range items {
		m, err := p.mapping(item, "a descriptor", "key", "value", "rate_limit", "descriptors",
			"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata")
		if err != nil {
			return err
		}
		var key, value string
		if kp, ok := m["key"]; ok {
			if key, err = p.str(kp); err != nil {
				return err
			}
		}
		if key == "" {
			return p.errf(deref(item), "descriptor has empty key")
		}
		if vp, ok := m["value"]; ok {
			if value, err = p.str(vp); err != nil {
				return err
			}
		}
		final := key
		if value != "" {
			final += "_" + value
		}
		if _, dup := parent.children[final]; dup {
			return p.errf(deref(m["key"].v), "duplicate descriptor composite key %q", prefix+final)
		}
		flags := map[string]bool{}
		for _, f := range []string{"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold"} {
			if fp, ok := m[f]; ok {
				if flags[f], err = p.boolean(fp); err != nil {
					return err
				}
			}
		}
		if mp, ok := m["metadata"]; ok {
			// Accepted as envoyproxy/ratelimit accepts it; the service
			// sends no dynamic metadata, so it is not used.
			if v := deref(mp.v); v.Kind != yaml.MappingNode && v.Tag != "!!null" {
				return p.errf(v, "metadata must be a mapping, not %s", describe(v))
			}
		}
		child := &node{children: map[string]*node{}, valueToMetric: flags["value_to_metric"], shareThreshold: flags["share_threshold"]}
		if child.shareThreshold {
			if !strings.Contains(final, "*") {
				return p.errf(deref(m["share_threshold"].v), "share_threshold can only be used with wildcard values (containing '*'), but found key %q", final)
			}
			child.wildcardPattern = final
		}
		if rp, ok := m["rate_limit"]; ok && deref(rp.v).Tag != "!!null" {
			r := &Rule{Domain: domain, Path: prefix + final, policy: policyName(polPrefix, final), File: p.file, Line: rp.k.Line,
				ShadowMode: flags["shadow_mode"], QuotaMode: flags["quota_mode"],
				DetailedMetric: flags["detailed_metric"], ValueToMetric: flags["value_to_metric"]}
			if err := p.rateLimit(r, rp); err != nil {
				return err
			}
			child.rule = r
			p.c.rules = append(p.c.rules, r)
		}
		if strings.Contains(final, "*") {
			parent.wildcards = append(parent.wildcards, wildcard{key: final, parts: strings.Split(final, "*")})
		}
		if dp, ok := m["descriptors"]; ok {
			if err := p.descriptors(child, domain, prefix+final+".", policyName(polPrefix, final), dp); err != nil {
				return err
			}
		}
		parent.children[final] = child
	}
	return nil
}

// rateLimit reads a rate_limit block into r.
func (p *parser) rateLimit(r *Rule, pr pair) error {
	m, err := p.mapping(pr.v, "rate_limit", "unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "windows")
	if err != nil {
		return err
	}
	if up, ok := m["unlimited"]; ok {
		if r.Unlimited, err = p.boolean(up); err != nil {
			return err
		}
	}
	if np, ok := m["name"]; ok {
		if r.Name, err = p.str(np); err != nil {
			return err
		}
	}
	if rp, ok := m["replaces"]; ok {
		items, err := p.list(rp)
		if err != nil {
			return err
		}
		for _, it := range items {
			im, err := p.mapping(it, "a replaces entry", "name")
			if err != nil {
				return err
			}
			var name string
			if np, ok := im["name"]; ok {
				if name, err = p.str(np); err != nil {
					return err
				}
			}
			if name == "" {
				return p.errf(deref(it), "should not have an empty replaces entry")
			}
			if name == r.Name {
				return p.errf(deref(it), "replaces should not contain name of same descriptor (%q)", name)
			}
			r.Replaces = append(r.Replaces, name)
		}
	}
	if r.Unlimited {
		if u, ok := m["unit"]; ok {
			if s, _ := p.str(u); validUnit(s) {
				return p.errf(deref(u.v), "should not specify rate limit unit when unlimited (unit %q)", s)
			}
		}
		for _, k := range []string{"algorithm", "burst", "windows"} {
			if kp, ok := m[k]; ok {
				return p.errf(kp.k, "an unlimited rate_limit has no %s", k)
			}
		}
		return nil
	}
	w, err := p.window(m, "rate_limit", deref(pr.v))
	if err != nil {
		return err
	}
	r.Windows = append(r.Windows, w)
	if wp, ok := m["windows"]; ok {
		items, err := p.list(wp)
		if err != nil {
			return err
		}
		for _, it := range items {
			wm, err := p.mapping(it, "a window", "unit", "requests_per_unit", "algorithm", "burst")
			if err != nil {
				return err
			}
			w, err := p.window(wm, "a window", deref(it))
			if err != nil {
				return err
			}
			r.Windows = append(r.Windows, w)
		}
		if len(r.Windows) > keyrate.MaxLimits {
			return p.errf(deref(wp.v), "%d windows in one rule, more than the %d keyrate enforces together", len(r.Windows), keyrate.MaxLimits)
		}
	}
	if pol := r.Policy(); !r.denyAll() {
		if err := pol.Validate(); err != nil {
			return &ConfigError{File: p.file, Line: pr.k.Line, Column: pr.k.Column, Msg: err.Error(), Err: err}
		}
	}
	return nil
}

// validUnit reports whether s names a unit (not UNKNOWN).
func validUnit(s string) bool {
	v, ok := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	return ok && v != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
}

// unitNames lists the units for errors.
const unitNames = "second, minute, hour, day, week, month, year"

// window reads one window's unit, requests_per_unit, algorithm and burst
// from m, the mapping at n (named what in errors).
func (p *parser) window(m map[string]pair, what string, n *yaml.Node) (Window, error) {
	var w Window
	var unit string
	var err error
	up, ok := m["unit"]
	if ok {
		if unit, err = p.str(up); err != nil {
			return w, err
		}
	}
	if !validUnit(unit) {
		at := n
		if ok {
			at = deref(up.v)
		}
		return w, p.errf(at, "invalid rate limit unit %q in %s (want one of %s)", unit, what, unitNames)
	}
	w.Unit = Unit(rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)])
	if rp, ok := m["requests_per_unit"]; ok {
		n, err := p.uint(rp, 1<<32-1)
		if err != nil {
			return w, err
		}
		w.RequestsPerUnit = uint32(n)
	}
	w.Algorithm = keyrate.FixedWindow
	if ap, ok := m["algorithm"]; ok {
		s, err := p.str(ap)
		if err != nil {
			return w, err
		}
		if w.Algorithm, err = keyrate.ParseAlgorithm(s); err != nil {
			return w, &ConfigError{File: p.file, Line: deref(ap.v).Line, Column: deref(ap.v).Column, Msg: err.Error(), Err: err}
		}
	}
	if bp, ok := m["burst"]; ok {
		if w.Algorithm != keyrate.TokenBucket {
			return w, p.errf(bp.k, "burst applies to algorithm token-bucket only, not %s", w.Algorithm)
		}
		b, err := p.uint(bp, 1<<62)
		if err != nil {
			return w, err
		}
		if b == 0 {
			return w, p.errf(deref(bp.v), "burst 0 is below 1")
		}
		w.Burst = int(b)
	}
	if w.RequestsPerUnit > 0 {
		if err := w.Limit().Validate(); err != nil {
			at := n
			if rp, ok := m["requests_per_unit"]; ok {
				at = deref(rp.v)
			}
			return w, &ConfigError{File: p.file, Line: at.Line, Column: at.Column, Msg: fmt.Sprintf("%d per %s: %v", w.RequestsPerUnit, strings.ToLower(w.Unit.String()), err), Err: err}
		}
	}
	return w, nil
}
