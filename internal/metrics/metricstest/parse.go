// Package metricstest reads the Prometheus text exposition format strictly,
// for tests: every line of an exposition must check out.
package metricstest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Sample is one sample line.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Family is a metric family: its HELP, TYPE and samples.
type Family struct {
	Name, Help, Type string
	Samples          []Sample
}

// Parse reads text line by line and returns its families by name. It fails
// at the first line that breaks the format: a malformed HELP or TYPE line, a
// bad metric or label name, a bad escape in a label value, a value that is
// not a number, a sample before its family's TYPE or apart from the rest of
// its family, a series given twice, or a histogram whose buckets are not
// cumulative, lack le="+Inf", or disagree with _count, or that lacks _sum.
func Parse(text string) (map[string]*Family, error) {
	if text == "" || !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("an exposition must be lines ending in a newline")
	}
	families := map[string]*Family{}
	var current *Family
	seen := map[string]bool{} // series already given
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n++
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# TYPE "):
			f, err := describe(families, current, line)
			if err != nil {
				return nil, fail("%v", err)
			}
			current = f
		case strings.HasPrefix(line, "#"):
			// a comment
		default:
			s, err := parseSample(line)
			if err != nil {
				return nil, fail("%v", err)
			}
			if current == nil || current.Type == "" || familyOf(s.Name, current.Type) != current.Name {
				return nil, fail("sample outside its family (TYPE must come first, and the family's samples together)")
			}
			key := seriesKey(s)
			if seen[key] {
				return nil, fail("series given twice")
			}
			seen[key] = true
			current.Samples = append(current.Samples, s)
		}
	}
	if err := checkFamilies(families); err != nil {
		return nil, err
	}
	return families, nil
}

// describe applies a HELP or TYPE line to its family, made if it is new,
// and returns the family, the current one from then on.
func describe(families map[string]*Family, current *Family, line string) (*Family, error) {
	rest := line[len("# HELP "):]
	name, text, ok := strings.Cut(rest, " ")
	if !ok || !validMetricName(name) {
		return nil, errors.New("bad metric name")
	}
	f := families[name]
	if f == nil {
		f = &Family{Name: name}
		families[name] = f
	} else if f != current {
		return nil, fmt.Errorf("family %s was described before, apart from here", name)
	}
	if strings.HasPrefix(line, "# HELP ") {
		if f.Help != "" {
			return nil, errors.New("a second HELP")
		}
		if _, err := unescape(text, false); err != nil {
			return nil, err
		}
		f.Help = text
	} else {
		if f.Type != "" {
			return nil, errors.New("a second TYPE")
		}
		if len(f.Samples) > 0 {
			return nil, errors.New("TYPE after the family's samples")
		}
		if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, text) {
			return nil, fmt.Errorf("unknown type %q", text)
		}
		f.Type = text
	}
	return f, nil
}

// checkFamilies checks what only a whole exposition shows: every family
// has a TYPE, every histogram checks out, no counter is negative or NaN.
func checkFamilies(families map[string]*Family) error {
	for _, f := range families {
		if f.Type == "" {
			return fmt.Errorf("family %s has no TYPE", f.Name)
		}
		if f.Type == "histogram" {
			if err := checkHistogram(f); err != nil {
				return fmt.Errorf("histogram %s: %w", f.Name, err)
			}
		}
		if f.Type == "counter" {
			for _, s := range f.Samples {
				if s.Value < 0 || math.IsNaN(s.Value) {
					return fmt.Errorf("counter %s is %v", s.Name, s.Value)
				}
			}
		}
	}
	return nil
}

// familyOf returns the family a sample named name belongs to, for a family
// of type typ.
func familyOf(name, typ string) string {
	if typ == "histogram" {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				return base
			}
		}
	}
	return name
}

func seriesKey(s Sample) string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		fmt.Fprintf(&b, "\x00%s=%s", k, s.Labels[k])
	}
	return b.String()
}

// It is long on purpose: a strict reader of the text format, rule after rule
// in the order the format states them, for tests to fail on any departure.
func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	if !validMetricName(s.Name) {
		return s, fmt.Errorf("bad metric name %q", s.Name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if rest == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				return s, fmt.Errorf("label without =")
			}
			name := rest[:eq]
			if !validLabelName(name) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			if _, dup := s.Labels[name]; dup {
				return s, fmt.Errorf("label %s twice", name)
			}
			rest = rest[eq+1:]
			if rest == "" || rest[0] != '"' {
				return s, fmt.Errorf("label %s: value not quoted", name)
			}
			end := 1
			for ; end < len(rest) && rest[end] != '"'; end++ {
				if rest[end] == '\\' {
					end++
				}
			}
			if end >= len(rest) {
				return s, fmt.Errorf("label %s: unterminated value", name)
			}
			value, err := unescape(rest[1:end], true)
			if err != nil {
				return s, fmt.Errorf("label %s: %v", name, err)
			}
			s.Labels[name] = value
			rest = rest[end+1:]
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("labels not separated by commas")
			}
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return s, fmt.Errorf("no space before the value")
	}
	fields := strings.Split(rest[1:], " ")
	if len(fields) > 2 {
		return s, fmt.Errorf("more than a value and a timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("bad timestamp %q", fields[1])
		}
	}
	return s, nil
}

func parseValue(v string) (float64, error) {
	switch v {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || strings.ContainsAny(v, "_xXpP") || strings.EqualFold(v, "inf") || strings.EqualFold(v, "infinity") {
		return 0, fmt.Errorf("bad value %q", v)
	}
	return f, nil
}

// unescape undoes the escapes of HELP text (\\ and \n) or of label values
// (also \"), and refuses any other.
func unescape(s string, quoted bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && quoted {
			return "", fmt.Errorf("unescaped quote")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", fmt.Errorf("a lone backslash at the end")
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == '"' && quoted:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("bad escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

func validMetricName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func validLabelName(name string) bool {
	return validMetricName(name) && !strings.Contains(name, ":") && !strings.HasPrefix(name, "__")
}

// checkHistogram checks each series of a histogram: buckets in ascending le
// with cumulative counts, the last le="+Inf" and equal to _count, and _sum.
//
// It is long on purpose: a strict reader of the text format, rule after rule
// in the order the format states them, for tests to fail on any departure.
func checkHistogram(f *Family) error {
	type series struct {
		les    []float64
		counts []float64
		sum    bool
		count  float64
		hasCnt bool
	}
	all := map[string]*series{}
	var order []string
	for _, s := range f.Samples {
		labels := map[string]string{}
		for k, v := range s.Labels {
			if k != "le" {
				labels[k] = v
			}
		}
		key := seriesKey(Sample{Labels: labels})
		se := all[key]
		if se == nil {
			se = &series{}
			all[key] = se
			order = append(order, key)
		}
		switch s.Name {
		case f.Name + "_bucket":
			le, ok := s.Labels["le"]
			if !ok {
				return fmt.Errorf("a bucket without le")
			}
			bound, err := parseValue(le)
			if err != nil {
				return fmt.Errorf("le %q: %v", le, err)
			}
			if n := len(se.les); n > 0 && bound <= se.les[n-1] {
				return fmt.Errorf("le %q does not ascend", le)
			}
			if n := len(se.counts); n > 0 && s.Value < se.counts[n-1] {
				return fmt.Errorf("bucket le=%q (%v) is below the one before: buckets must be cumulative", le, s.Value)
			}
			se.les = append(se.les, bound)
			se.counts = append(se.counts, s.Value)
		case f.Name + "_sum":
			se.sum = true
		case f.Name + "_count":
			se.count, se.hasCnt = s.Value, true
		default:
			return fmt.Errorf("sample %s is not a bucket, _sum or _count", s.Name)
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("no samples")
	}
	for _, key := range order {
		se := all[key]
		switch {
		case len(se.les) == 0 || !math.IsInf(se.les[len(se.les)-1], 1):
			return fmt.Errorf("series %q: no le=\"+Inf\" bucket last", key)
		case !se.sum:
			return fmt.Errorf("series %q: no _sum", key)
		case !se.hasCnt:
			return fmt.Errorf("series %q: no _count", key)
		case se.count != se.counts[len(se.counts)-1]:
			return fmt.Errorf("series %q: _count %v differs from the +Inf bucket %v", key, se.count, se.counts[len(se.counts)-1])
		}
	}
	return nil
}
