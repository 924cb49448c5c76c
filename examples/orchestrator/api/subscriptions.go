package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

func (a *API) listProducts(w http.ResponseWriter, _ *http.Request) {
	a.locked(w, func() (int, any) { return http.StatusOK, a.products })
}

func (a *API) getProduct(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "product_id")
	a.locked(w, func() (int, any) {
		if p := a.product(id); p != nil {
			return http.StatusOK, p
		}
		return failf(http.StatusNotFound, "product %q not found", id)
	})
}

// product returns the product with the given id, or nil. a.mu must be held.
func (a *API) product(id string) *Product {
	for _, p := range a.products {
		if p.ProductID == id {
			return p
		}
	}
	return nil
}

func (a *API) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	customer, status := q.Get("customer_id"), q.Get("status")
	if status != "" && !slices.Contains(subscriptionStatuses, status) {
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("status %q is not one of %s", status, strings.Join(subscriptionStatuses, ", "))})
		return
	}
	limit, offset, err := page(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, detail{err.Error()})
		return
	}
	a.locked(w, func() (int, any) {
		var out []*Subscription
		for _, s := range a.subscriptions {
			if (customer == "" || s.CustomerID == customer) && (status == "" || s.Status == status) {
				out = append(out, s)
			}
		}
		return http.StatusOK, paginate(out, limit, offset)
	})
}

// subscription returns the subscription with the given id, or nil. a.mu
// must be held.
func (a *API) subscription(id string) *Subscription {
	for _, s := range a.subscriptions {
		if s.SubscriptionID == id {
			return s
		}
	}
	return nil
}

func (a *API) getSubscription(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "subscription_id")
	a.locked(w, func() (int, any) {
		if s := a.subscription(id); s != nil {
			return http.StatusOK, s
		}
		return failf(http.StatusNotFound, "subscription %q not found", id)
	})
}

func (a *API) getDomainModel(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "subscription_id")
	a.locked(w, func() (int, any) {
		s := a.subscription(id)
		if s == nil {
			return failf(http.StatusNotFound, "subscription %q not found", id)
		}
		p := a.product(s.ProductID)
		if p == nil { // the seed data never does this
			return failf(http.StatusInternalServerError, "subscription %q: product %q not found", id, s.ProductID)
		}
		return http.StatusOK, DomainModel{
			Subscription: s,
			Product:      p,
			Blocks: []Block{
				{Name: p.ProductType + "Block", Resources: map[string]string{
					"description": s.Description, "status": s.Status, "insync": fmt.Sprint(s.Insync),
				}},
				{Name: "IPAddressBlock", Resources: map[string]string{"ipv4": "192.0.2.10/32", "ipv6": "2001:db8::10/128"}},
			},
		}
	})
}
