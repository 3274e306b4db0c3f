package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages that talk to the API server for the daemon.
var daemonAPIPackages = []string{"../../collector/kube", "../../exporter", "../../daemon"}

// groupMethods maps a typed client's group method to its API group.
var groupMethods = map[string]string{"CoreV1": "", "AppsV1": "apps", "BatchV1": "batch", "DiscoveryV1": "discovery.k8s.io",
	"AuthenticationV1": "authentication.k8s.io", "AuthorizationV1": "authorization.k8s.io"}

// libraryAccess: what a client-go or k8s.io/apiserver helper the code hands
// a client to calls with it. Each must be found in the code to count.
var libraryAccess = map[string]apiAccess{
	// record.EventBroadcaster's sink: a new Event is created, a repeat patched.
	"EventSinkImpl": {"", "events", []string{"create", "patch"}},
	// The delegating authenticator and authorizer (daemon/auth.go).
	"TokenAccessReviewClient":   {"authentication.k8s.io", "tokenreviews", []string{"create"}},
	"SubjectAccessReviewClient": {"authorization.k8s.io", "subjectaccessreviews", []string{"create"}},
}

var verbMethods = map[string]string{"Get": "get", "List": "list", "Watch": "watch", "Create": "create", "Patch": "patch",
	"Update": "update", "Delete": "delete", "DeleteCollection": "deletecollection"}

// TestNeededAccessIsWhatTheCodeCalls derives from the daemon's source the
// API access it makes (typed client calls, list-watches, metadata gets of
// the GroupVersionResources it names, the helpers above) and compares it
// with neededAccess, which TestDoctorRBACMatchesManifest keeps equal to the
// ClusterRole: a verb the code does not use is not granted.
func TestNeededAccessIsWhatTheCodeCalls(t *testing.T) {
	used := map[[2]string]map[string]bool{}
	add := func(group, resource string, verbs ...string) {
		k := [2]string{group, resource}
		if used[k] == nil {
			used[k] = map[string]bool{}
		}
		for _, v := range verbs {
			used[k][v] = true
		}
	}
	for _, dir := range daemonAPIPackages {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var gvrs [][2]string
		metadataGet := false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string][]string{} // x := client.CoreV1().Pods(ns)
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					if id, ok := n.Lhs[0].(*ast.Ident); ok && len(n.Rhs) == 1 {
						vars[id.Name] = chain(n.Rhs[0], vars)
					}
				case *ast.CallExpr:
					c := chain(n, vars)
					if len(c) == 0 || typedAccess(c, add) {
						return true
					}
					if last := c[len(c)-1]; (last == "NewFilteredListWatchFromClient" || last == "NewListWatchFromClient") && len(n.Args) > 1 {
						g := chain(n.Args[0], vars)
						res, _ := strconv.Unquote(literal(n.Args[1]))
						for _, m := range g {
							if group, ok := groupMethods[m]; ok {
								add(group, res, "list", "watch")
							}
						}
					}
					if slices.Contains(c, "Resource") && c[len(c)-1] == "Get" {
						metadataGet = true
					}
				case *ast.CompositeLit:
					if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "GroupVersionResource" {
						gvrs = append(gvrs, [2]string{fieldValue(n, "Group"), fieldValue(n, "Resource")})
					}
					if a, ok := libraryAccess[typeName(n.Type)]; ok {
						add(a.group, a.resource, a.verbs...)
					}
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if a, ok := libraryAccess[literal(kv.Key)]; ok {
								add(a.group, a.resource, a.verbs...)
							}
						}
					}
				}
				return true
			})
		}
		if metadataGet { // the metadata client reads the resources it names, one by one
			for _, g := range gvrs {
				add(g[0], g[1], "get")
			}
		}
	}
	for _, a := range neededAccess {
		var verbs []string
		for v := range used[[2]string{a.group, a.resource}] {
			verbs = append(verbs, v)
		}
		delete(used, [2]string{a.group, a.resource})
		slices.Sort(verbs)
		want := slices.Sorted(slices.Values(a.verbs))
		if !slices.Equal(verbs, want) {
			t.Errorf("%s/%s: the code uses %v, the ClusterRole grants %v", a.group, a.resource, verbs, want)
		}
	}
	for k, v := range used {
		t.Errorf("%s/%s: the code uses %v, the ClusterRole grants nothing", k[0], k[1], v)
	}
}

var resourceMethod = regexp.MustCompile(`^[A-Z][A-Za-z]+s$`)

// typedAccess adds client.<Group>V1().<Resources>(...).<Verb>(...).
func typedAccess(c []string, add func(string, string, ...string)) bool {
	for i := 0; i+2 < len(c); i++ {
		group, ok := groupMethods[c[i]]
		verb, isVerb := verbMethods[c[i+2]]
		if ok && isVerb && resourceMethod.MatchString(c[i+1]) {
			add(group, strings.ToLower(c[i+1]), verb)
			return true
		}
	}
	return false
}

// chain flattens a.B().C(x).D into [a B C D], through variables assigned
// from a chain.
func chain(e ast.Expr, vars map[string][]string) []string {
	switch e := e.(type) {
	case *ast.CallExpr:
		return chain(e.Fun, vars)
	case *ast.SelectorExpr:
		return append(chain(e.X, vars), e.Sel.Name)
	case *ast.Ident:
		if c, ok := vars[e.Name]; ok {
			return slices.Clone(c)
		}
		return []string{e.Name}
	case *ast.UnaryExpr:
		return chain(e.X, vars)
	}
	return nil
}

func literal(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func typeName(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return sel.Sel.Name
	}
	return literal(e)
}

func fieldValue(n *ast.CompositeLit, name string) string {
	for _, e := range n.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok && literal(kv.Key) == name {
			v, _ := strconv.Unquote(literal(kv.Value))
			return v
		}
	}
	return ""
}
