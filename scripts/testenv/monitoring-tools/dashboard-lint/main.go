// dashboard-lint checks Grafana dashboard JSON files the way the chart ships them:
//
//   - strictly decoded against Grafana's dashboard schema (the types the Grafana Foundation SDK
//     generates from it, with every panel plugin's options and field config and the Prometheus
//     query type registered): an unknown or mistyped field anywhere is an error, and the
//     schema's constraints (Validate) hold;
//   - every query is valid PromQL (Prometheus' own parser, Grafana's interval variables
//     substituted), uses the dashboard's `datasource` variable, and rates over
//     $__rate_interval;
//   - every panel has a title, a description and a unit.
//
// With -metrics it prints the metric names the queries select, one per line, so a caller can
// check them against what the application exports. Exit 0 clean, 1 findings, 2 usage.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
)

// Grafana's built-in interval variables, replaced by a duration before parsing.
var intervals = strings.NewReplacer(
	"$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h",
)

const datasourceVariable = "${datasource}"

func main() {
	printMetrics := flag.Bool("metrics", false, "print the metric names the queries select")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-lint [-metrics] DASHBOARD.json...")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()
	promql := parser.NewParser(parser.Options{})
	failed := false
	metrics := map[string]bool{}
	for _, path := range flag.Args() {
		findings := lint(path, promql, metrics)
		for _, finding := range findings {
			fmt.Printf("%s: %s\n", path, finding)
		}
		if len(findings) > 0 {
			failed = true
		} else if !*printMetrics {
			fmt.Printf("%s: ok\n", path)
		}
	}
	if *printMetrics && !failed {
		names := make([]string, 0, len(metrics))
		for name := range metrics {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Println(strings.Join(names, "\n"))
	}
	if failed {
		os.Exit(1)
	}
}

func lint(path string, promql parser.Parser, metrics map[string]bool) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var board dashboard.Dashboard
	if err := board.UnmarshalJSONStrict(raw); failed(err) {
		return []string{"schema: " + err.Error()}
	}
	if err := board.Validate(); failed(err) {
		return []string{"schema: " + err.Error()}
	}
	var findings []string
	hasDatasourceVariable := false
	for _, variable := range board.Templating.List {
		if variable.Name == "datasource" && variable.Type == dashboard.VariableTypeDatasource {
			hasDatasourceVariable = true
		}
	}
	if !hasDatasourceVariable {
		findings = append(findings, "templating: no `datasource` variable of type datasource")
	}
	if len(board.Panels) == 0 {
		findings = append(findings, "panels: none")
	}
	// The SDK's strict decoding of `panels` (and of a panel's `targets`) takes an empty error
	// list for an error and drops the panel (the query): its errors, if any, are reported
	// above, but the content is lost. So each panel and query is decoded here again.
	var top struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return append(findings, err.Error())
	}
	for index, rawPanel := range top.Panels {
		where := fmt.Sprintf("panels[%d]", index)
		var kind struct {
			Type    string            `json:"type"`
			Targets []json.RawMessage `json:"targets"`
		}
		if err := json.Unmarshal(rawPanel, &kind); err != nil || kind.Type == "row" {
			continue // a row holds no queries; a non-object was reported above
		}
		var panel dashboard.Panel
		if err := panel.UnmarshalJSONStrict(rawPanel); failed(err) {
			findings = append(findings, where+": schema: "+err.Error())
			continue
		}
		if err := panel.Validate(); failed(err) {
			findings = append(findings, where+": schema: "+err.Error())
		}
		findings = append(findings, lintPanel(where, &panel, kind.Targets, promql, metrics)...)
	}
	return findings
}

func lintPanel(where string, panel *dashboard.Panel, targets []json.RawMessage, promql parser.Parser, metrics map[string]bool) []string {
	var findings []string
	if panel.Title == nil || *panel.Title == "" {
		findings = append(findings, where+": no title")
	} else {
		where = fmt.Sprintf("%s %q", where, *panel.Title)
	}
	if panel.Description == nil || *panel.Description == "" {
		findings = append(findings, where+": no description")
	}
	if panel.FieldConfig == nil || panel.FieldConfig.Defaults.Unit == nil || *panel.FieldConfig.Defaults.Unit == "" {
		findings = append(findings, where+": no unit")
	}
	if !usesVariable(panel.Datasource) {
		findings = append(findings, where+": datasource is not "+datasourceVariable)
	}
	if len(targets) == 0 {
		findings = append(findings, where+": no queries")
	}
	for index, target := range targets {
		here := fmt.Sprintf("%s targets[%d]", where, index)
		var query prometheus.Dataquery
		if err := query.UnmarshalJSONStrict(target); failed(err) {
			findings = append(findings, here+": schema: "+err.Error())
			continue
		}
		if err := query.Validate(); failed(err) {
			findings = append(findings, here+": schema: "+err.Error())
		}
		findings = append(findings, lintQuery(here, &query, promql, metrics)...)
	}
	return findings
}

func lintQuery(where string, query *prometheus.Dataquery, promql parser.Parser, metrics map[string]bool) []string {
	var findings []string
	if !usesVariable(query.Datasource) {
		findings = append(findings, where+": datasource is not "+datasourceVariable)
	}
	expression, err := promql.ParseExpr(intervals.Replace(query.Expr))
	if err != nil {
		return append(findings, fmt.Sprintf("%s: invalid PromQL: %v", where, err))
	}
	parser.Inspect(expression, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name != "" {
				metrics[n.Name] = true
			}
		case *parser.Call:
			if n.Func.Name == "rate" || n.Func.Name == "increase" || n.Func.Name == "irate" {
				if !strings.Contains(query.Expr, "$__rate_interval") {
					findings = append(findings, fmt.Sprintf("%s: %s() should use $__rate_interval", where, n.Func.Name))
				}
			}
		}
		return nil
	})
	return findings
}

// failed tells an error from the SDK's empty error list (a typed nil it returns for success).
func failed(err error) bool {
	return err != nil && err.Error() != ""
}

func usesVariable(reference *common.DataSourceRef) bool {
	return reference != nil && reference.Uid != nil && *reference.Uid == datasourceVariable
}
