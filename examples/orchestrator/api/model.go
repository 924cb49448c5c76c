package api

import (
	"crypto/rand"
	"fmt"
	"time"
)

// The types below are the API's JSON bodies; openapi.json's
// components/schemas describes the same shapes.

// Workflow is a kind of process that can be started.
type Workflow struct {
	WorkflowID string `json:"workflow_id"`
	Name       string `json:"name"`
	// Target is CREATE, MODIFY or TERMINATE: what the workflow does to a
	// subscription.
	Target      string    `json:"target"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// Process statuses. A new process is suspended (waiting for input); resume
// runs it; running and suspended processes can be aborted.
const (
	statusRunning   = "running"
	statusSuspended = "suspended"
	statusCompleted = "completed"
	statusAborted   = "aborted"
	statusFailed    = "failed"
)

var processStatuses = []string{statusRunning, statusSuspended, statusCompleted, statusAborted, statusFailed}

// Step is one step of a process.
type Step struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Process is one run of a workflow.
type Process struct {
	ProcessID      string         `json:"process_id"`
	WorkflowName   string         `json:"workflow_name"`
	Status         string         `json:"status"`
	CustomerID     string         `json:"customer_id"`
	ProductID      string         `json:"product_id,omitempty"`
	Note           string         `json:"note,omitempty"`
	UserInput      map[string]any `json:"user_input,omitempty"`
	Steps          []Step         `json:"steps"`
	StartedAt      time.Time      `json:"started_at"`
	LastModifiedAt time.Time      `json:"last_modified_at"`
}

// ProcessCreated is the response to starting a process: the process, plus its
// id under the name orchestrator-core's create response uses.
type ProcessCreated struct {
	ID string `json:"id"`
	*Process
}

// Product is something a customer can subscribe to.
type Product struct {
	ProductID   string `json:"product_id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	ProductType string `json:"product_type"`
	Tag         string `json:"tag,omitempty"`
	// Status is "active", "phase out" or "end of life".
	Status string `json:"status"`
}

var subscriptionStatuses = []string{"initial", "active", "terminated"}

// Subscription is a customer's instance of a product.
type Subscription struct {
	SubscriptionID string `json:"subscription_id"`
	CustomerID     string `json:"customer_id"`
	ProductID      string `json:"product_id"`
	ProductName    string `json:"product_name"`
	// Status is one of subscriptionStatuses.
	Status      string    `json:"status"`
	Description string    `json:"description"`
	StartDate   time.Time `json:"start_date"`
	Insync      bool      `json:"insync"`
}

// DomainModel is a subscription with its product and the product blocks'
// resource values, as orchestrator-core's domain-model endpoint returns it.
type DomainModel struct {
	Subscription *Subscription `json:"subscription"`
	Product      *Product      `json:"product"`
	Blocks       []Block       `json:"blocks"`
}

// Block is one product block of a [DomainModel].
type Block struct {
	Name      string            `json:"name"`
	Resources map[string]string `json:"resources"`
}

// seed fills the store. The ids are fixed, so that documentation and tests
// can name them; ids made at run time are random.
func (a *API) seed() {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	a.workflows = []*Workflow{
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d01", "create_node", "CREATE", "Create a network node subscription", t0},
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d02", "modify_node", "MODIFY", "Change a node's settings", t0},
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d03", "terminate_node", "TERMINATE", "Terminate a node subscription", t0},
	}
	a.products = []*Product{
		{"4b2f0c9e-0000-4000-8000-000000000001", "Node Cisco", "A Cisco router as a managed node", "Node", "NODE", "active"},
		{"4b2f0c9e-0000-4000-8000-000000000002", "Node Nokia", "A Nokia router as a managed node", "Node", "NODE", "active"},
		{"4b2f0c9e-0000-4000-8000-000000000003", "Port 10G", "A 10 Gb/s service port", "Port", "PORT", "phase out"},
	}
	sub := func(id, customer string, p *Product, status, desc string, start time.Time, insync bool) *Subscription {
		return &Subscription{id, customer, p.ProductID, p.Name, status, desc, start, insync}
	}
	a.subscriptions = []*Subscription{
		sub("9e8d7c6b-0000-4000-8000-000000000001", "c-1", a.products[0], "active", "Node ams-core-01", t0.AddDate(0, 1, 0), true),
		sub("9e8d7c6b-0000-4000-8000-000000000002", "c-1", a.products[2], "active", "Port ams-core-01 1/1/1", t0.AddDate(0, 2, 0), true),
		sub("9e8d7c6b-0000-4000-8000-000000000003", "c-2", a.products[1], "initial", "Node rtm-edge-02", t0.AddDate(0, 3, 0), false),
		sub("9e8d7c6b-0000-4000-8000-000000000004", "c-3", a.products[0], "terminated", "Node utr-old-01", t0, true),
	}
	a.processes = []*Process{
		{
			ProcessID: "5a4b3c2d-0000-4000-8000-000000000001", WorkflowName: "create_node", Status: statusCompleted,
			CustomerID: "c-1", ProductID: a.products[0].ProductID,
			Steps:     []Step{{"Start", "success"}, {"Provision", "success"}, {"Done", "complete"}},
			StartedAt: t0.AddDate(0, 1, 0), LastModifiedAt: t0.AddDate(0, 1, 0),
		},
		{
			ProcessID: "5a4b3c2d-0000-4000-8000-000000000002", WorkflowName: "modify_node", Status: statusRunning,
			CustomerID: "c-2",
			Steps:      []Step{{"Start", "success"}, {"Apply config", "running"}},
			StartedAt:  t0.AddDate(0, 3, 0), LastModifiedAt: t0.AddDate(0, 3, 0),
		},
	}
}

// newID returns a random (version 4) UUID.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
