package apiserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/duration"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1"
)

// MaxListItems bounds the objects one list answers: the latest are kept
// and a warning says how many were left out. A list's limit is ignored (a
// server may, the API says): without continue tokens to give, honouring it
// would cut kubectl's chunked lists (limit=500) short, silently.
const MaxListItems = 5000

// capItems keeps the last MaxListItems of items (the newest: the daemons'
// answers are ordered oldest first) and warns about the others.
func capItems[T any](ctx context.Context, items []T, what string) []T {
	if len(items) <= MaxListItems {
		return items
	}
	warning.AddWarning(ctx, "", fmt.Sprintf("%d %s matched; the latest %d are listed: narrow the list with a label selector "+
		"(drainwatch.io/workload, drainwatch.io/revision, drainwatch.io/node)", len(items), what, MaxListItems))
	return items[len(items)-MaxListItems:]
}

// query is what one list asks the daemons: the filter they apply, the
// nodes to ask (all when empty), and the full selector applied to their
// answers.
type query struct {
	filter   exporter.Filter
	nodes    []string
	selector labels.Selector
}

// newQuery reads a list's namespace (empty: all) and label selector;
// equality on the workload, revision, pod and node labels narrows what the
// daemons are asked. A field selector other than metadata.name and
// metadata.namespace is refused: there is nothing else to select on.
func newQuery(ctx context.Context, opts *metainternalversion.ListOptions) (query, error) {
	q := query{filter: exporter.Filter{Namespace: genericapirequest.NamespaceValue(ctx)}, selector: labels.Everything()}
	if opts == nil {
		return q, nil
	}
	if opts.LabelSelector != nil {
		q.selector = opts.LabelSelector
		reqs, _ := opts.LabelSelector.Requirements()
		for _, r := range reqs {
			v, ok := single(r)
			if !ok {
				continue
			}
			switch r.Key() {
			case v1alpha1.LabelWorkload:
				q.filter.Workload = v
			case v1alpha1.LabelRevision:
				q.filter.Revision = v
			case v1alpha1.LabelPod:
				q.filter.Pod = v
			case v1alpha1.LabelNode:
				q.nodes = []string{v}
			}
		}
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		for _, r := range opts.FieldSelector.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return q, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: only metadata.name and metadata.namespace can be selected on", r.Field))
			}
		}
	}
	return q, nil
}

// single is the one value a requirement asks for by equality.
func single(r labels.Requirement) (string, bool) {
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		if vs := r.ValuesUnsorted(); len(vs) == 1 {
			return vs[0], true
		}
	}
	return "", false
}

// fieldsOf are the fields a field selector may name.
func fieldsOf(m metav1.ObjectMeta) map[string]string {
	return map[string]string{"metadata.name": m.Name, "metadata.namespace": m.Namespace}
}

// matches applies the list's selectors to an object.
func matches(opts *metainternalversion.ListOptions, q query, m metav1.ObjectMeta) bool {
	if !q.selector.Matches(labels.Set(m.Labels)) {
		return false
	}
	if opts != nil && opts.FieldSelector != nil && !opts.FieldSelector.Matches(fields.Set(fieldsOf(m))) {
		return false
	}
	return true
}

// unanswered turns the daemons' errors into NodeErrors and a warning
// kubectl prints; a node named by the selector without a daemon is one
// too.
func unanswered(ctx context.Context, errs []error, missing []string, asked int) []v1alpha1.NodeError {
	var out []v1alpha1.NodeError
	for _, n := range missing {
		out = append(out, v1alpha1.NodeError{Node: n, Error: "no drainwatch daemon on this node"})
	}
	for _, err := range errs {
		var de *exporter.DaemonError
		if errors.As(err, &de) {
			out = append(out, v1alpha1.NodeError{Node: de.Daemon, Error: de.Err.Error()})
		} else {
			out = append(out, v1alpha1.NodeError{Error: err.Error()})
		}
	}
	if len(out) > 0 {
		names := make([]string, 0, len(out))
		for _, e := range out {
			names = append(names, e.Node)
		}
		warning.AddWarning(ctx, "", fmt.Sprintf("%d of %d nodes did not answer, their records are missing: %s",
			len(out), asked+len(missing), strings.Join(names, ", ")))
	}
	return out
}

// noneAnswered is the error of a list that no daemon answered: a list
// would look empty, not unknown.
func noneAnswered(gr schema.GroupResource, errs []error) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf("no drainwatch daemon answered for %s: %v", gr, errors.Join(errs...)))
}

// objectName names a record: the pod and its UID's first 8 characters,
// and a container's termination's container and start.
func objectName(pod, uid, container string, start time.Time) string {
	short := uid
	if len(short) > 8 {
		short = short[:8]
	}
	name := pod + "." + short
	if container != "" {
		name += "." + container + "." + strconv.FormatInt(start.Unix(), 10)
	}
	return name
}

// objectLabels are a record's labels.
func objectLabels(w collector.Workload, pod, node, container string) map[string]string {
	l := map[string]string{v1alpha1.LabelPod: pod}
	for k, v := range map[string]string{v1alpha1.LabelWorkloadKind: w.Kind, v1alpha1.LabelWorkload: w.Name, v1alpha1.LabelRevision: w.Revision,
		v1alpha1.LabelNode: node, v1alpha1.LabelContainer: container} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// terminationObject is a daemon's termination as an API object.
func terminationObject(v exporter.TerminationView) v1alpha1.Termination {
	t := v.Termination
	return v1alpha1.Termination{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Termination"},
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(t.Pod, t.PodUID, t.Container, t.Start()), Namespace: t.Workload.Namespace,
			CreationTimestamp: metav1.NewTime(t.Start()), Labels: objectLabels(t.Workload, t.Pod, t.Node, t.Container),
		},
		Record: v,
	}
}

// startupObject is a daemon's startup as an API object; the node is the
// daemon's that answered.
func startupObject(v exporter.StartupView) v1alpha1.Startup {
	s := v.Startup
	created := s.Marks.Created
	return v1alpha1.Startup{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Startup"},
		ObjectMeta: metav1.ObjectMeta{
			Name: objectName(s.Pod, s.PodUID, "", time.Time{}), Namespace: s.Workload.Namespace,
			CreationTimestamp: metav1.NewTime(created), Labels: objectLabels(s.Workload, s.Pod, cmp.Or(s.Node, v.Daemon), ""),
		},
		Record: s,
	}
}

// terminations is the REST storage of terminations.
type terminations struct {
	daemons *daemonSet
	resource
}

// resource is what both resources share: read-only, namespaced.
type resource struct{ singular string }

func (resource) NamespaceScoped() bool       { return true }
func (resource) Destroy()                    {}
func (r resource) GetSingularName() string   { return r.singular }
func (terminations) New() runtime.Object     { return &v1alpha1.Termination{} }
func (terminations) NewList() runtime.Object { return &v1alpha1.TerminationList{} }

var (
	_ rest.Storage              = terminations{}
	_ rest.Lister               = terminations{}
	_ rest.Getter               = terminations{}
	_ rest.Scoper               = terminations{}
	_ rest.SingularNameProvider = terminations{}
)

// List asks the daemons (those of the selector's node) for the
// terminations the namespace and selectors match.
func (s terminations) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	q, err := newQuery(ctx, opts)
	if err != nil {
		return nil, err
	}
	ds, missing, err := s.daemons.daemons(q.nodes)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	views, errs := exporter.QueryDaemons(ctx, ds, q.filter)
	if len(ds) > 0 && len(errs) == len(ds) {
		return nil, noneAnswered(Resource("terminations"), errs)
	}
	list := &v1alpha1.TerminationList{Items: []v1alpha1.Termination{}}
	for _, v := range views {
		if o := terminationObject(v); matches(opts, q, o.ObjectMeta) {
			list.Items = append(list.Items, o)
		}
	}
	list.Items = capItems(ctx, list.Items, "terminations")
	list.Unanswered = unanswered(ctx, errs, missing, len(ds))
	return list, nil
}

// Get finds one termination by name in its namespace.
func (s terminations) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := s.List(ctx, nameOptions(name))
	if err != nil {
		return nil, err
	}
	list := obj.(*v1alpha1.TerminationList)
	if len(list.Items) == 0 {
		return nil, notFound(Resource("terminations"), name, list.Unanswered)
	}
	return &list.Items[0], nil
}

// startups is the REST storage of startups.
type startups struct {
	daemons *daemonSet
	resource
}

func (startups) New() runtime.Object     { return &v1alpha1.Startup{} }
func (startups) NewList() runtime.Object { return &v1alpha1.StartupList{} }

var (
	_ rest.Lister = startups{}
	_ rest.Getter = startups{}
)

// List asks the daemons for the startups the namespace and selectors
// match.
func (s startups) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	q, err := newQuery(ctx, opts)
	if err != nil {
		return nil, err
	}
	ds, missing, err := s.daemons.daemons(q.nodes)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	views, truncated, errs := exporter.QueryStartups(ctx, ds, q.filter)
	if len(ds) > 0 && len(errs) == len(ds) {
		return nil, noneAnswered(Resource("startups"), errs)
	}
	list := &v1alpha1.StartupList{Items: []v1alpha1.Startup{}, Truncated: truncated}
	for _, v := range views {
		if o := startupObject(v); matches(opts, q, o.ObjectMeta) {
			list.Items = append(list.Items, o)
		}
	}
	list.Items = capItems(ctx, list.Items, "startups")
	list.Unanswered = unanswered(ctx, errs, missing, len(ds))
	if len(truncated) > 0 {
		warning.AddWarning(ctx, "", "the daemons of "+strings.Join(truncated, ", ")+" held more startups than one list carries: only their latest are listed")
	}
	return list, nil
}

// Get finds one startup by name in its namespace.
func (s startups) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := s.List(ctx, nameOptions(name))
	if err != nil {
		return nil, err
	}
	list := obj.(*v1alpha1.StartupList)
	if len(list.Items) == 0 {
		return nil, notFound(Resource("startups"), name, list.Unanswered)
	}
	return &list.Items[0], nil
}

// nameOptions select one name.
func nameOptions(name string) *metainternalversion.ListOptions {
	sel := labels.Everything()
	// Only a name with one dot is surely a pod's own termination of a pod
	// without dots; a pod name may hold dots, and a container's
	// termination adds two: the others ask for the whole namespace.
	if pod, _, ok := strings.Cut(name, "."); ok && strings.Count(name, ".") == 1 {
		r, err := labels.NewRequirement(v1alpha1.LabelPod, selection.Equals, []string{pod})
		if err == nil {
			sel = labels.NewSelector().Add(*r)
		}
	}
	return &metainternalversion.ListOptions{LabelSelector: sel, FieldSelector: fields.OneTermEqualSelector("metadata.name", name)}
}

// notFound is a 404, or a 503 when a node did not answer: the record may
// be on it.
func notFound(gr schema.GroupResource, name string, missing []v1alpha1.NodeError) error {
	if len(missing) > 0 {
		nodes := make([]string, 0, len(missing))
		for _, m := range missing {
			nodes = append(nodes, m.Node)
		}
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s %q not found on the nodes that answered; %s did not",
			gr, name, strings.Join(nodes, ", ")))
	}
	return apierrors.NewNotFound(gr, name)
}

// Resource is a resource of the API group.
func Resource(name string) schema.GroupResource {
	return v1alpha1.SchemeGroupVersion.WithResource(name).GroupResource()
}

// The table columns of kubectl get.
var (
	terminationColumns = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "The pod (and the container of a container's termination)."},
		{Name: "Node", Type: "string"},
		{Name: "Workload", Type: "string", Description: "Kind/name of the pod's owner."},
		{Name: "Revision", Type: "string", Priority: 1},
		{Name: "Cause", Type: "string", Description: "Why the pod stopped."},
		{Name: "Refused", Type: "integer", Description: "Connections refused after the stop signal."},
		{Name: "Killed", Type: "integer", Description: "Requests killed by SIGKILL."},
		{Name: "Other", Type: "integer", Description: "Requests killed at exit, blackholed connections, resets at shutdown and on reused connections."},
		{Name: "Diagnoses", Type: "string"},
		{Name: "Age", Type: "string"},
	}
	startupColumns = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Node", Type: "string"},
		{Name: "Workload", Type: "string"},
		{Name: "Revision", Type: "string", Priority: 1},
		{Name: "Refused-Before-Ready", Type: "integer"},
		{Name: "Refused-After-Ready", Type: "integer"},
		{Name: "Reset-After-Ready", Type: "integer"},
		{Name: "Complete", Type: "boolean"},
		{Name: "Age", Type: "string"},
	}
)

// ConvertToTable is what kubectl get prints.
func (terminations) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	var items []v1alpha1.Termination
	switch o := obj.(type) {
	case *v1alpha1.Termination:
		items = []v1alpha1.Termination{*o}
	case *v1alpha1.TerminationList:
		items = o.Items
	default:
		return nil, fmt.Errorf("not a termination: %T", obj)
	}
	t := &metav1.Table{ColumnDefinitions: terminationColumns}
	for i := range items {
		r := items[i].Record
		c := r.Counts
		other := c.RequestsKilledAtExit + c.ConnectionsBlackholed + c.ConnectionsResetAtShutdown + c.RequestsResetOnReusedConnections
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{items[i].Name, r.Node, workloadName(r.Workload), r.Workload.Revision, r.Cause,
				c.RefusedAfterSigterm, c.RequestsKilledBySigkill, other, diagnoses(r.Diagnoses), age(items[i].CreationTimestamp)},
			Object: runtime.RawExtension{Object: &items[i]},
		})
	}
	return t, nil
}

// ConvertToTable is what kubectl get prints.
func (startups) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	var items []v1alpha1.Startup
	switch o := obj.(type) {
	case *v1alpha1.Startup:
		items = []v1alpha1.Startup{*o}
	case *v1alpha1.StartupList:
		items = o.Items
	default:
		return nil, fmt.Errorf("not a startup: %T", obj)
	}
	t := &metav1.Table{ColumnDefinitions: startupColumns}
	for i := range items {
		r := items[i].Record
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{items[i].Name, items[i].Labels[v1alpha1.LabelNode], workloadName(r.Workload), r.Workload.Revision,
				r.Counts.RefusedBeforeReady, r.Counts.RefusedAfterReady, r.Counts.ResetAfterReady, r.Complete,
				age(items[i].CreationTimestamp)},
			Object: runtime.RawExtension{Object: &items[i]},
		})
	}
	return t, nil
}

func workloadName(w collector.Workload) string {
	if w.Kind == "" {
		return w.Name
	}
	return strings.ToLower(w.Kind) + "/" + w.Name
}

func diagnoses(ds []correlate.Diagnosis) string {
	if len(ds) == 0 {
		return "<none>"
	}
	codes := make([]string, 0, len(ds))
	for _, d := range ds {
		if !slices.Contains(codes, d.Code) {
			codes = append(codes, d.Code)
		}
	}
	return strings.Join(codes, ",")
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
