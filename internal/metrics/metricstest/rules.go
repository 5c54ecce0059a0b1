package metricstest

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rule is an alerting rule of a Prometheus rule file.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ReadRules returns the alerting rules of a Prometheus rule file, in order.
// It refuses keys it does not know, recording rules among them, so that a
// test reads every rule whole.
func ReadRules(text []byte) ([]Rule, error) {
	var file struct {
		Groups []struct {
			Name     string `yaml:"name"`
			Interval string `yaml:"interval"`
			Rules    []Rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return nil, err
	}
	var rules []Rule
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				return nil, fmt.Errorf("group %s: a rule without alert or expr", g.Name)
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// Selector is a vector selector of an expression: a metric name and its
// label matchers.
type Selector struct {
	Name     string
	Matchers []Matcher
}

// Matcher is one label matcher of a selector: Op is =, !=, =~ or !~.
type Matcher struct {
	Label, Op, Value string
}

// String returns the selector as PromQL writes it.
func (s Selector) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	if len(s.Matchers) > 0 {
		b.WriteByte('{')
		for i, m := range s.Matchers {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s%s%q", m.Label, m.Op, m.Value)
		}
		b.WriteByte('}')
	}
	return b.String()
}

// promqlWords are the words of PromQL that name no metric: aggregations,
// and the keywords of grouping, matching and set operators.
var promqlWords = []string{
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
	"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
}

// labelListAfter are the keywords followed by a list of label names.
var labelListAfter = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// Selectors returns the vector selectors of a PromQL expression, in order.
// It reads what the rules of this repository write: metric names with
// optional matchers, functions, aggregations, grouping and matching
// clauses, numbers, durations in brackets and operators. Any other word is
// taken for a metric name, so that a caller that checks the names against
// an exposition fails on what it does not understand, rather than pass it.
func Selectors(expr string) ([]Selector, error) {
	var sels []Selector
	depth := 0 // of parentheses
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'':
			return nil, fmt.Errorf("%q: a string outside a selector's matchers", expr)
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("%q: an unclosed [", expr)
			}
			i += end + 1
		case c == '{':
			return nil, fmt.Errorf("%q: matchers without a metric name", expr)
		case '0' <= c && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
			word := expr[start:i]
			next := skipSpace(i)
			switch {
			case slices.Contains(labelListAfter, word):
				if next >= len(expr) || expr[next] != '(' {
					return nil, fmt.Errorf("%q: %s without its labels", expr, word)
				}
				end := strings.IndexByte(expr[next:], ')')
				if end < 0 {
					return nil, fmt.Errorf("%q: an unclosed (", expr)
				}
				i = next + end + 1
			case slices.Contains(promqlWords, word):
			case next < len(expr) && expr[next] == '(':
				// A function's name.
			default:
				sel := Selector{Name: word}
				if next < len(expr) && expr[next] == '{' {
					var err error
					sel.Matchers, i, err = matchers(expr, next)
					if err != nil {
						return nil, err
					}
				}
				sels = append(sels, sel)
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%q: a ) without its (", expr)
			}
			i++
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: an unclosed (", expr)
	}
	return sels, nil
}

// matcherRE is one matcher: label, operator, double-quoted value, and the
// comma after it, if any.
var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,?)`)

// matchers reads the matchers of expr from its { at i, and returns them and
// the position after its }.
func matchers(expr string, i int) ([]Matcher, int, error) {
	i++ // the {
	var ms []Matcher
	for {
		if j := strings.IndexFunc(expr[i:], func(r rune) bool { return r != ' ' }); j >= 0 && expr[i+j] == '}' {
			return ms, i + j + 1, nil
		}
		m := matcherRE.FindStringSubmatch(expr[i:])
		if m == nil {
			return nil, 0, fmt.Errorf("%q: a matcher at offset %d that this reader does not know", expr, i)
		}
		if strings.Contains(m[3], `\`) {
			return nil, 0, fmt.Errorf("%q: an escape in a matcher's value", expr)
		}
		ms = append(ms, Matcher{Label: m[1], Op: m[2], Value: m[3]})
		i += len(m[0])
		if m[4] == "" {
			if j := strings.IndexFunc(expr[i:], func(r rune) bool { return r != ' ' }); j < 0 || expr[i+j] != '}' {
				return nil, 0, fmt.Errorf("%q: matchers without a closing }", expr)
			}
		}
	}
}

// Matches reports whether the matcher holds for the labels, where a label
// they lack has the empty value, as in PromQL.
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Label]
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	}
	matched := regexp.MustCompile("^(?:" + m.Value + ")$").MatchString(v)
	return matched == (m.Op == "=~")
}

// Matches reports whether the selector selects the sample.
func (s Selector) Matches(sample Sample) bool {
	if sample.Name != s.Name {
		return false
	}
	for _, m := range s.Matchers {
		if !m.Matches(sample.Labels) {
			return false
		}
	}
	return true
}

// Samples returns the samples of families named as the selector names them:
// a family's own, or a histogram's _bucket, _sum and _count.
func (s Selector) Samples(families map[string]*Family) ([]Sample, bool) {
	f := families[s.Name]
	if f == nil {
		f = families[familyOf(s.Name, "histogram")]
		if f == nil || f.Type != "histogram" {
			return nil, false
		}
	}
	var samples []Sample
	for _, sample := range f.Samples {
		if sample.Name == s.Name {
			samples = append(samples, sample)
		}
	}
	return samples, true
}

// Check returns an error unless the exposition's families hold what the
// selector names: its metric, each label it matches on, and each value it
// asks for. An = matcher's value must be some sample's; each alternative of
// an =~ matcher (split at |) must match some sample's. The values of the
// labels in open appear only once something is counted (a status, say):
// of those, only the label is checked.
func (s Selector) Check(families map[string]*Family, open ...string) error {
	samples, ok := s.Samples(families)
	if !ok {
		return fmt.Errorf("%s: no such metric", s)
	}
	for _, m := range s.Matchers {
		var values []string
		for _, sample := range samples {
			if v, ok := sample.Labels[m.Label]; ok {
				values = append(values, v)
			}
		}
		if len(values) == 0 {
			return fmt.Errorf("%s: no sample of %s has the label %s", s, s.Name, m.Label)
		}
		if slices.Contains(open, m.Label) {
			continue
		}
		var want []string
		switch m.Op {
		case "=":
			want = []string{m.Value}
		case "=~":
			want = strings.Split(m.Value, "|")
		}
		for _, alt := range want {
			re, err := regexp.Compile("^(?:" + alt + ")$")
			if err != nil {
				return fmt.Errorf("%s: %v", s, err)
			}
			if !slices.ContainsFunc(values, re.MatchString) {
				return fmt.Errorf("%s: no sample of %s has %s matching %q (it has %q)", s, s.Name, m.Label, alt, values)
			}
		}
	}
	return nil
}
