package main

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/drainwatch/drainwatch/tools/docgen/docpage"
)

// valuesFile is the chart's values, the source of the values table.
const valuesFile = "deploy/helm/drainwatch/values.yaml"

// value is one row of the values table.
type value struct {
	key, def, comment string
}

// valuesTable is the Markdown table of the chart's values: each key, its
// default and the comment above it, in the file's order.
func valuesTable(root string) (string, error) {
	data, err := os.ReadFile(root + "/" + valuesFile)
	if err != nil {
		return "", err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", valuesFile, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s: not a mapping", valuesFile)
	}
	var rows []value
	walkValues(doc.Content[0], "", &rows)
	var b strings.Builder
	b.WriteString("| value | default | description |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.key, docpage.Code(r.def), docpage.Cell(r.comment))
	}
	return b.String(), nil
}

// walkValues appends a row per key of m. A mapping whose keys carry
// comments of their own is a row (its comment, when it has one) followed
// by its keys; any other value is one row with its default in flow style.
func walkValues(m *yaml.Node, prefix string, rows *[]value) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		comment := commentText(k.HeadComment)
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 && commented(v) {
			if comment != "" {
				*rows = append(*rows, value{key: key, comment: comment})
			}
			walkValues(v, key+".", rows)
			continue
		}
		*rows = append(*rows, value{key: key, def: flow(v), comment: comment})
	}
}

// commented says whether a key of m, or below, has a comment.
func commented(m *yaml.Node) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].HeadComment != "" || (m.Content[i+1].Kind == yaml.MappingNode && commented(m.Content[i+1])) {
			return true
		}
	}
	return false
}

// flow is v's YAML on one line, without comments.
func flow(v *yaml.Node) string {
	c := *v
	stripComments(&c)
	c.Style = yaml.FlowStyle
	out, err := yaml.Marshal(&c)
	if err != nil {
		return v.Value
	}
	return strings.TrimSpace(string(out))
}

func stripComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for i, c := range n.Content {
		cc := *c
		stripComments(&cc)
		cc.Style |= yaml.FlowStyle
		n.Content[i] = &cc
	}
}

// commentText joins a head comment's lines without their "#".
func commentText(c string) string {
	var parts []string
	for _, l := range strings.Split(c, "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
