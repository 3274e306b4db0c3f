package apiserver

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openAPIDefinitions are the OpenAPI definitions the generic API server
// needs (server-side apply builds its type converter from them, /openapi
// serves them): k8s.io/apimachinery's types, generated, as kube-aggregator
// ships them (its own types left out), and the four types of this API,
// written here: a record's schema is the daemon API's (docs/timeline.md),
// free-form under record.
func openAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := map[string]common.OpenAPIDefinition{}
	for name, def := range aggregatoropenapi.GetOpenAPIDefinitions(ref) {
		if strings.HasPrefix(name, "io.k8s.apimachinery.") {
			defs[name] = def
		}
	}
	for name, def := range recordDefinitions(ref) {
		defs[name] = def
	}
	return defs
}

// recordDefinitions are the definitions of the API's own types.
func recordDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	meta := func(desc string, of string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Ref: ref(of)}}
	}
	objectMeta, listMeta := metav1.ObjectMeta{}.OpenAPIModelName(), metav1.ListMeta{}.OpenAPIModelName()
	const pkg = "github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1."
	object := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Description: desc},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}}
	}
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: desc}}
	}
	kind, version := str("Kind is the object's kind."), str("APIVersion is drainwatch.io/v1alpha1.")
	item := func(desc, record string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{
			Type: []string{"object"}, Description: desc,
			Properties: map[string]spec.Schema{
				"kind": kind, "apiVersion": version, "metadata": meta("The object's metadata: name, namespace, labels.", objectMeta),
				"record": object(record),
			},
		}}, Dependencies: []string{objectMeta}}
	}
	list := func(desc, item string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{
			Type: []string{"object"}, Description: desc, Required: []string{"items"},
			Properties: map[string]spec.Schema{
				"kind": kind, "apiVersion": version, "metadata": meta("The list's metadata.", listMeta),
				"items":      {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(pkg + item)}}}}},
				"unanswered": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: ptrTo(object("A node whose daemon did not answer, and why."))}}},
				"truncated":  {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: ptrTo(str("A node that held more than one list carries."))}}},
			},
		}}, Dependencies: []string{listMeta, pkg + item}}
	}
	return map[string]common.OpenAPIDefinition{
		pkg + "Termination":     item("Termination is one pod's (or container's) termination as its node's daemon recorded it.", "The daemon API's termination record (docs/timeline.md)."),
		pkg + "TerminationList": list("TerminationList is a list of terminations.", "Termination"),
		pkg + "Startup":         item("Startup is one new pod's startup as its node's daemon recorded it.", "The daemon API's startup record (docs/timeline.md)."),
		pkg + "StartupList":     list("StartupList is a list of startups.", "Startup"),
	}
}

func ptrTo[T any](v T) *T { return &v }
