package server

import (
	"encoding/json"
	"net/http"
	"slices"
)

// model is OpenAI's model object.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// retrieveModel answers GET /v1/models/{model}: the model object of one
// of the models and agents the server serves, or 404 in OpenAI's error
// format.
func (s *Server) retrieveModel(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authenticate(r); !ok {
		writeError(w, errAuth)
		return
	}
	id := r.PathValue("model")
	if !slices.Contains(s.models, id) {
		writeError(w, unknownModel(id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(model{ID: id, Object: "model", OwnedBy: "batchagent"})
}
