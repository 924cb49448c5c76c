package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// maxBody bounds the JSON bodies the API reads.
const maxBody = 1 << 20

// decode reads r's JSON body into v, rejecting unknown fields and trailing
// data. An empty body leaves v alone unless required.
func decode(r *http.Request, v any, required bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errors.New("cannot read the body")
	}
	if len(body) > maxBody {
		return fmt.Errorf("the body is over %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			return errors.New("a JSON body is required")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON body: data after the JSON value")
	}
	return nil
}

// page reads the limit (1..100, default 20) and offset (≥ 0, default 0)
// query parameters.
func page(r *http.Request) (limit, offset int, err error) {
	limit, offset = 20, 0
	q := r.URL.Query()
	for _, f := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"limit", &limit, 1, 100}, {"offset", &offset, 0, 1 << 30}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < f.min || n > f.max {
				return 0, 0, fmt.Errorf("%s must be an integer from %d to %d", f.name, f.min, f.max)
			}
			*f.dst = n
		}
	}
	return limit, offset, nil
}

// paginate returns a page of items, never nil (so it encodes as []).
func paginate[T any](items []T, limit, offset int) []T {
	if offset >= len(items) {
		return []T{}
	}
	return items[offset:min(len(items), offset+limit)]
}
