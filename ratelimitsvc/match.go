package ratelimitsvc

import (
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match is what one descriptor of a request matched in a config.
type match struct {
	// rule is the matched rule, nil for none (an unknown domain, a
	// descriptor no rule's path ends at).
	rule *Rule
	// metric is the descriptor label of the metrics: the rule's path, or
	// with DetailedMetric or ValueToMetric, a path with the request's
	// values.
	metric string
	// shared holds, for an entry matched by a wildcard with
	// share_threshold, the wildcard value to key the bucket by instead of
	// the entry's own; nil when no entry shares.
	shared []string
}

// match finds the rule for one descriptor of domain, as
// envoyproxy/ratelimit's GetLimit does: at each level it tries the entry's
// "key_value", then the level's wildcard values in config order, then
// "key" alone; a rule applies only where its path ends at the
// descriptor's last entry. known is false for an unknown domain.
func (c *Config) match(domain string, entries []*rlv3.RateLimitDescriptor_Entry) (m match, known bool) {
	m, known, labels := c.find(domain, entries, false)
	if labels {
		m, _, _ = c.find(domain, entries, true)
	}
	return m, known
}

// find is match. Without labels it builds no metric label and reports
// whether one other than the rule's path may be due (the rule, or a node
// on its way, puts values in it); with labels it builds it.
func (c *Config) find(domain string, entries []*rlv3.RateLimitDescriptor_Entry, labels bool) (m match, known, wantLabels bool) {
	root := c.domains[domain]
	if root == nil {
		return m, false, false
	}
	children, prev := root.children, root
	var detailed, vtm strings.Builder
	if labels {
		detailed.WriteString(domain)
		vtm.WriteString(domain)
	}
	valueToMetric := false
	for i, e := range entries {
		final := e.GetKey() + "_" + e.GetValue()
		if labels {
			detailed.WriteByte('.')
			detailed.WriteString(final)
		}
		next := children[final]
		var wild string
		if next == nil {
			for _, w := range prev.wildcards {
				if wildcardMatch(w.parts, final) {
					next, wild = children[w.key], w.key
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = children[e.GetKey()]
		}
		if wild != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
			if m.shared == nil {
				m.shared = make([]string, len(entries))
			}
			m.shared[i] = strings.TrimPrefix(next.wildcardPattern, e.GetKey()+"_")
		}
		if next != nil && next.valueToMetric {
			valueToMetric = true
		}
		if labels {
			vtm.WriteByte('.')
			vtm.WriteString(e.GetKey())
		}
		if labels && next != nil {
			var v string
			switch {
			case wild != "" && m.shared != nil && m.shared[i] != "":
				v = m.shared[i]
			case wild != "" && next.valueToMetric:
				v = e.GetValue()
			case wild != "":
				v = strings.TrimPrefix(wild, e.GetKey()+"_")
			case byValue, next.valueToMetric:
				v = e.GetValue()
			}
			if v != "" {
				vtm.WriteByte('_')
				vtm.WriteString(v)
			}
		}
		if next != nil && next.rule != nil && i == len(entries)-1 {
			m.rule = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		children, prev = next.children, next
	}
	if m.rule == nil {
		return m, true, false
	}
	if !labels {
		m.metric = m.rule.Path
		return m, true, valueToMetric || m.rule.DetailedMetric || m.rule.ValueToMetric
	}
	switch {
	case m.rule.DetailedMetric && m.shared != nil:
		var b strings.Builder
		b.WriteString(domain)
		for i, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.GetKey())
			v := e.GetValue()
			if i < len(m.shared) && m.shared[i] != "" {
				v = m.shared[i]
			}
			if v != "" {
				b.WriteByte('_')
				b.WriteString(v)
			}
		}
		m.metric = b.String()
	case m.rule.DetailedMetric:
		m.metric = detailed.String()
	default:
		m.metric = vtm.String()
	}
	return m, true, false
}

// wildcardMatch reports whether value matches a wildcard split at each
// '*' (each '*' matches zero or more bytes), as envoyproxy/ratelimit
// matches a descriptor value holding '*' anywhere.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	fixed := 0
	for _, p := range parts {
		fixed += len(p)
	}
	if len(value) < fixed {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
