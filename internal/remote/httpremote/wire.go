package httpremote

import (
	"encoding/json"
	"net/http"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// APIVersion is the protocol version this build speaks.
const APIVersion = 1

// Capabilities is the document of GET /v1/capabilities.
type Capabilities struct {
	API           string `json:"api"` // "mstore"
	Versions      []int  `json:"versions"`
	Push          bool   `json:"push"`
	MaxBatchBlobs int    `json:"max_batch_blobs"`
	MaxBatchBytes int64  `json:"max_batch_bytes"`
	MaxHasBlobs   int    `json:"max_has_blobs"`
}

type digestList struct {
	Digests []objects.Digest `json:"digests"`
}

type haveList struct {
	Have []bool `json:"have"`
}

type refDoc struct {
	Name    string           `json:"name"`
	Current objects.Digest   `json:"current"`
	History []objects.Digest `json:"history"`
}

type moveDoc struct {
	From    *objects.Digest `json:"from"` // null: the ref must not exist
	To      objects.Digest  `json:"to"`
	Message string          `json:"message"`
}

type tagDoc struct {
	Digest  objects.Digest `json:"digest"`
	Created bool           `json:"created,omitempty"`
}

type errorDoc struct {
	Error struct {
		Class   string `json:"class"`
		Message string `json:"message"`
	} `json:"error"`
	Missing []objects.Digest `json:"missing,omitempty"`
}

// errUnauthorized is a request without the right token.
const classUnauthorized = "unauthorized"

func statusOf(c errs.Class) int {
	switch c {
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict:
		return http.StatusConflict
	case errs.IntegrityError:
		return http.StatusUnprocessableEntity
	case errs.SizeLimitExceeded:
		return http.StatusRequestEntityTooLarge
	case errs.SchemaError, errs.PathTraversal, errs.InvalidArchive:
		return http.StatusBadRequest
	case errs.UnsupportedVersion:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

func classByKey(key string) errs.Class {
	for _, c := range errs.Classes() {
		if c.Key() == key {
			return c
		}
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
