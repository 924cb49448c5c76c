package annotations

import (
	"encoding/json"
	"io"
	"strings"
)

// SARIF 2.1.0 (OASIS), the subset code-scanning UIs read: one run, the rules,
// and one result per finding with a physical and a logical location.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string       `json:"id"`
	Name                 string       `json:"name"`
	ShortDescription     sarifMessage `json:"shortDescription"`
	DefaultConfiguration struct {
		Level Severity `json:"level"`
	} `json:"defaultConfiguration"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     Severity        `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
	// Properties carry, for the text rules, the field and the code points.
	Properties *sarifProperties `json:"properties,omitempty"`
}

type sarifProperties struct {
	Field      string   `json:"field,omitempty"`
	CodePoints []string `json:"codePoints,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation struct {
		ArtifactLocation struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
		Region *sarifRegion `json:"region,omitempty"`
	} `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

const sarifSchema = "https://json.schemastore.org/sarif-2.1.0.json"

func (r *Report) writeSARIF(w io.Writer) error {
	run := sarifRun{Results: []sarifResult{}}
	run.Tool.Driver = sarifDriver{Name: "mcpgate", InformationURI: "https://github.com/mcpgate/mcpgate"}
	index := map[string]int{}
	for i, rule := range LintRules {
		sr := sarifRule{ID: rule.ID, Name: rule.Name, ShortDescription: sarifMessage{rule.Description}}
		sr.DefaultConfiguration.Level = rule.Severity
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sr)
		index[rule.ID] = i
	}
	for _, f := range r.Findings {
		var loc sarifLocation
		loc.PhysicalLocation.ArtifactLocation.URI = f.Source
		if f.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Line}
		}
		loc.LogicalLocations = []sarifLogical{{Name: f.Tool, FullyQualifiedName: f.Location, Kind: "function"}}
		res := sarifResult{
			RuleID: f.Rule, RuleIndex: index[f.Rule], Level: f.Severity,
			Message: sarifMessage{f.Message}, Locations: []sarifLocation{loc},
		}
		if f.Field != "" {
			res.Properties = &sarifProperties{Field: f.Field, CodePoints: f.CodePoints}
		}
		run.Results = append(run.Results, res)
	}
	if lines := r.Drift.Lines(); len(lines) > 0 {
		// The lock's drift (audit --lock), one result per tool, prompt or
		// resource, under a rule of its own: what changed since the review.
		sr := sarifRule{ID: driftRule, Name: "LockDrift", ShortDescription: sarifMessage{"A tool, prompt or resource differs from the reviewed lockfile."}}
		sr.DefaultConfiguration.Level = SeverityError
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sr)
		for _, line := range lines {
			var loc sarifLocation
			loc.PhysicalLocation.ArtifactLocation.URI = "mcpgate.lock.json"
			loc.LogicalLocations = []sarifLogical{{Name: driftSubject(line), FullyQualifiedName: driftSubject(line), Kind: "function"}}
			run.Results = append(run.Results, sarifResult{
				RuleID: driftRule, RuleIndex: len(run.Tool.Driver.Rules) - 1, Level: SeverityError,
				Message: sarifMessage{line}, Locations: []sarifLocation{loc},
			})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: "2.1.0", Runs: []sarifRun{run}})
}

// driftRule is the SARIF rule of the lock's drift.
const driftRule = "MCPG-LOCK"

// driftSubject is the tool or prompt a drift line is about: "+ prompt x:
// …" → "prompt x", "~ renamed a → b (…)" → "b", "- t: …" → "t".
func driftSubject(line string) string {
	s := strings.TrimLeft(line, "+-~ ")
	if after, ok := strings.CutPrefix(s, "renamed "); ok {
		if _, to, ok := strings.Cut(after, " → "); ok {
			s = to
		}
		s, _, _ = strings.Cut(s, " (")
		return s
	}
	s, _, _ = strings.Cut(s, ":")
	return s
}
