package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"
)

// Bounds of a note, as the document declares them (NewNote).
const (
	maxTitle    = 200   // characters
	maxBody     = 10000 // characters
	maxNoteJSON = 64 << 10
)

// Note is one note, as the API returns it.
type Note struct {
	ID        int       `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

// notes is the in-memory store. It is safe for concurrent use.
type notes struct {
	mu     sync.Mutex
	byID   map[int]Note
	order  []int // ids, oldest first
	nextID int
}

// newNotes returns a store seeded with two notes, so that a first list or get
// has something to show.
func newNotes() *notes {
	n := &notes{byID: map[int]Note{}, nextID: 1}
	n.add("Welcome", "This service serves its notes over REST at /api/notes and as MCP tools at /mcp.")
	n.add("Shopping", "Milk, eggs, coffee.")
	return n
}

func (n *notes) add(title, body string) Note {
	n.mu.Lock()
	defer n.mu.Unlock()
	note := Note{ID: n.nextID, Title: title, Body: body, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	n.nextID++
	n.byID[note.ID] = note
	n.order = append(n.order, note.ID)
	return note
}

func (n *notes) list(titleContains string) []Note {
	n.mu.Lock()
	defer n.mu.Unlock()
	want := strings.ToLower(titleContains)
	out := []Note{} // [] rather than null when there are none
	for _, id := range n.order {
		if note := n.byID[id]; strings.Contains(strings.ToLower(note.Title), want) {
			out = append(out, note)
		}
	}
	return out
}

func (n *notes) get(id int) (Note, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	note, ok := n.byID[id]
	return note, ok
}

func (n *notes) remove(id int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.byID[id]; !ok {
		return false
	}
	delete(n.byID, id)
	for i, v := range n.order {
		if v == id {
			n.order = append(n.order[:i], n.order[i+1:]...)
			break
		}
	}
	return true
}

func (s *Service) listNotes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.notes.list(r.URL.Query().Get("title_contains")))
}

func (s *Service) getNote(w http.ResponseWriter, r *http.Request) {
	id, ok := noteID(w, r)
	if !ok {
		return
	}
	note, ok := s.notes.get(id)
	if !ok {
		writeJSON(w, http.StatusNotFound, detail{fmt.Sprintf("note %d not found", id)})
		return
	}
	writeJSON(w, http.StatusOK, note)
}

func (s *Service) createNote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title *string `json:"title"`
		Body  string  `json:"body"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxNoteJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, detail{fmt.Sprintf("body is over %d bytes", maxNoteJSON)})
			return
		}
		writeJSON(w, http.StatusBadRequest, detail{"body is not a JSON note: " + err.Error()})
		return
	}
	switch {
	case in.Title == nil || strings.TrimSpace(*in.Title) == "":
		writeJSON(w, http.StatusBadRequest, detail{"title is required"})
	case utf8.RuneCountInString(*in.Title) > maxTitle:
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("title is over %d characters", maxTitle)})
	case utf8.RuneCountInString(in.Body) > maxBody:
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("body is over %d characters", maxBody)})
	default:
		writeJSON(w, http.StatusCreated, s.notes.add(*in.Title, in.Body))
	}
}

func (s *Service) deleteNote(w http.ResponseWriter, r *http.Request) {
	id, ok := noteID(w, r)
	if !ok {
		return
	}
	if !s.notes.remove(id) {
		writeJSON(w, http.StatusNotFound, detail{fmt.Sprintf("note %d not found", id)})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// noteID reads the {note_id} path segment, or answers 400 and returns false.
func noteID(w http.ResponseWriter, r *http.Request) (int, bool) {
	raw := mux.Vars(r)["note_id"]
	id, err := strconv.Atoi(raw)
	if err != nil || id < 1 {
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("note_id %q is not a positive integer", raw)})
		return 0, false
	}
	return id, true
}
