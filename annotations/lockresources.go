package annotations

import (
	"fmt"
	"slices"
	"strings"
)

// LockedResource is one resource (or resource template) of a Lock, an
// OpenAPI operation's or a playbook's: the operation it reads (a playbook
// resource's is GET and its URL) and what a client is shown of it. Its URI, or
// its template, is its key; a resource's title and description are text a
// model reads, so any change to one is a critical change.
type LockedResource struct {
	// URI is set for a resource, URITemplate for a template: exactly one.
	URI         string `json:"uri,omitempty"`
	URITemplate string `json:"uriTemplate,omitempty"`
	Name        string `json:"name"`
	MIMEType    string `json:"mimeType,omitempty"`
	// DescriptionSHA256 hashes the title and description as the document
	// gives them.
	DescriptionSHA256 string `json:"descriptionSha256"`
	Upstream          string `json:"upstream"`
	Method            string `json:"method"`
	Path              string `json:"path"`
}

// ResourceFacts is a resource as the audit lists it: what the lock
// records, and what selected it.
type ResourceFacts struct {
	LockedResource
	// SelectedBy is what made the operation a resource: "x-mcp-resource",
	// "tag agent-resource" or "rule GET /pets/{petId}".
	SelectedBy string `json:"selectedBy"`
}

// Key is the resource's URI, or its template.
func (r LockedResource) Key() string { return r.URI + r.URITemplate }

// SetResources records resources in the lock, sorted by URI (or template).
func (l *Lock) SetResources(resources []LockedResource) {
	l.Resources = slices.Clone(resources)
	slices.SortFunc(l.Resources, func(a, b LockedResource) int { return strings.Compare(a.Key(), b.Key()) })
}

// ResourceChange is one field of a resource that differs from the lock.
type ResourceChange struct {
	Resource string `json:"resource"` // its URI or template
	Field    string `json:"field"`
	From     string `json:"from"`
	To       string `json:"to"`
}

// CompareResources adds to d how resources differ from l: one not in the
// lock is added, one no longer served removed, one whose name, media
// type, texts, upstream or operation differ changed. Like prompts,
// resources are never matched as renames: a new URI is a new resource.
func (d *Drift) CompareResources(l *Lock, resources []LockedResource) {
	locked := map[string]LockedResource{}
	for _, r := range l.Resources {
		locked[r.Key()] = r
	}
	current := map[string]bool{}
	for _, now := range resources {
		key := now.Key()
		current[key] = true
		was, ok := locked[key]
		if !ok {
			d.ResourcesAdded = append(d.ResourcesAdded, key)
			continue
		}
		for _, f := range []struct{ field, from, to string }{
			{"name", was.Name, now.Name},
			{"mimeType", was.MIMEType, now.MIMEType},
			{"title and description", short(was.DescriptionSHA256), short(now.DescriptionSHA256)},
			{"upstream", was.Upstream, now.Upstream},
			{"operation", was.Method + " " + was.Path, now.Method + " " + now.Path},
		} {
			if f.from != f.to {
				d.ResourcesChanged = append(d.ResourcesChanged, ResourceChange{Resource: key, Field: f.field, From: f.from, To: f.to})
			}
		}
	}
	for _, r := range l.Resources {
		if !current[r.Key()] {
			d.ResourcesRemoved = append(d.ResourcesRemoved, r.Key())
		}
	}
	slices.Sort(d.ResourcesAdded)
	slices.Sort(d.ResourcesRemoved)
}

// HeldResources returns the resources (URIs and templates) `serve --lock`
// does not serve, sorted: those added or changed since the lock.
func (d *Drift) HeldResources() []string {
	if d == nil {
		return nil
	}
	held := slices.Clone(d.ResourcesAdded)
	for _, c := range d.ResourcesChanged {
		held = append(held, c.Resource)
	}
	slices.Sort(held)
	return slices.Compact(held)
}

// resourceLines renders the resources' drift, one line per resource,
// after the prompts' (see Lines). Every change is critical: a resource's
// texts are read by the model, and its operation is what a read sends.
func (d *Drift) resourceLines() []string {
	var lines []string
	for _, n := range d.ResourcesAdded {
		lines = append(lines, "+ resource "+n+": not in the lock")
	}
	for _, n := range d.ResourcesRemoved {
		lines = append(lines, "- resource "+n+": in the lock, no longer served")
	}
	var order []string
	changes := map[string][]string{}
	for _, c := range d.ResourcesChanged {
		if changes[c.Resource] == nil {
			order = append(order, c.Resource)
		}
		changes[c.Resource] = append(changes[c.Resource], c.Field+" "+orNone(c.From)+" → "+orNone(c.To)+" [CRITICAL]")
	}
	for _, n := range order {
		lines = append(lines, "~ resource "+n+": "+strings.Join(changes[n], "; "))
	}
	return lines
}

// readResources checks a lock's resources: each with exactly one of uri
// and uriTemplate, once, named, with its description hash, upstream and
// operation.
func (l *Lock) readResources() error {
	seen := map[string]bool{}
	for _, r := range l.Resources {
		fail := func(why string) error {
			return fmt.Errorf("annotations: lockfile: resource %q %s", r.Key(), why)
		}
		switch {
		case (r.URI == "") == (r.URITemplate == ""):
			return fmt.Errorf("annotations: lockfile: a resource has both or neither of uri and uriTemplate (%q, %q)", r.URI, r.URITemplate)
		case seen[r.Key()]:
			return fail("appears twice")
		case r.Name == "" || r.DescriptionSHA256 == "":
			return fail("has no name or descriptionSha256")
		case r.Upstream == "" || r.Method == "" || r.Path == "":
			return fail("has no upstream, method or path")
		}
		seen[r.Key()] = true
	}
	return nil
}
