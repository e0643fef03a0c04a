package metrics_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/metrics"
)

// TestReadmeListsEveryMetric keeps the metrics table of docs/operations.md and the
// package doc in step with what Metrics describes: names, types and labels.
func TestReadmeListsEveryMetric(t *testing.T) {
	ch := make(chan *prometheus.Desc, 64)
	metrics.MustNew().Describe(ch)
	close(ch)
	descRe := regexp.MustCompile(`fqName: "([a-z_]+)".*variableLabels: \{([a-z_,]*)\}`)
	want := map[string]string{}
	for d := range ch {
		m := descRe.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		labels := strings.Split(m[2], ",")
		if m[2] == "" {
			labels = nil
		}
		slices.Sort(labels)
		want[m[1]] = strings.Join(labels, ",")
	}
	readme, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	rowRe := regexp.MustCompile("(?m)^\\| `(limitkit_[a-z_]+)` \\| (counter|gauge|histogram) \\|([^|]*)\\|")
	got := map[string]string{}
	for _, m := range rowRe.FindAllStringSubmatch(string(readme), -1) {
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		got[m[1]] = strings.Join(labels, ",")
	}
	assert.Equal(t, want, got, "docs/operations.md's metrics table")

	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for name := range want {
		assert.Contains(t, string(doc), "//\t"+name, "doc.go lists "+name)
	}
}
