package gateway

import (
	"context"
	"io"

	"github.com/mcpgate/mcpgate/gateway/catalog"
)

// The catalog lives in package catalog; these names keep the gateway's API
// as it was (gateway.BuildCatalog, gateway.Tool, …).
type (
	Catalog         = catalog.Catalog
	CatalogOptions  = catalog.Options
	Tool            = catalog.Tool
	UpstreamCount   = catalog.UpstreamCount
	DocumentError   = catalog.DocumentError
	Selection       = catalog.Selection
	ExplainedReport = catalog.ExplainedReport
	Listing         = catalog.Listing
	ListedTool      = catalog.ListedTool
	ListedUpstream  = catalog.ListedUpstream
	NotLoaded       = catalog.NotLoaded
)

// Tool _meta keys and the playbook route extension; see package catalog.
const (
	MetaProvenance    = catalog.MetaProvenance
	MetaLarge         = catalog.MetaLarge
	MetaPlaybook      = catalog.MetaPlaybook
	PlaybookExtension = catalog.PlaybookExtension
)

// BuildCatalog builds the catalog of cfg; see [catalog.Build].
func BuildCatalog(ctx context.Context, cfg *Config, opts *CatalogOptions) (*Catalog, error) {
	return catalog.Build(ctx, cfg, opts)
}

// WriteSelection writes `--explain`'s table; see [catalog.WriteSelection].
func WriteSelection(w io.Writer, sel []Selection) error { return catalog.WriteSelection(w, sel) }
