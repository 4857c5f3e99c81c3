// Package apiserver is what vmctl's clients of the Kubernetes API server
// share: the server's URL as client-go derives it from a rest.Config, and
// the *apierrors.StatusError of an answer that is not a success.
package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// MaxErrorBody bounds how much of an error response is read.
const MaxErrorBody = 1 << 20

// HostURL is the API server's URL as client-go derives it from config
// (scheme, host and an optional path prefix for API servers behind a
// path-routing proxy).
func HostURL(config *rest.Config) (*url.URL, error) {
	if config.Host == "" {
		return nil, fmt.Errorf("vmctl: the rest.Config has no host")
	}
	u, _, err := rest.DefaultServerUrlFor(config)
	if err != nil {
		return nil, fmt.Errorf("vmctl: API server address %q: %w", config.Host, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("vmctl: API server address %q: unsupported scheme %q", config.Host, u.Scheme)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// ResponseError turns an unsuccessful HTTP answer into an
// *apierrors.StatusError carrying the server's message and code. It reads
// a metav1.Status (what Kubernetes API servers send), a {code, message}
// object, or falls back to the body's text, or the HTTP status line.
func ResponseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return StatusError(resp.StatusCode, resp.Status, data)
}

// StatusError is the *apierrors.StatusError of an answer with HTTP code
// httpCode, status line httpStatus and body.
func StatusError(httpCode int, httpStatus string, body []byte) error {
	var st metav1.Status
	text := strings.TrimSpace(string(body))
	if len(text) > 0 && text[0] == '{' && json.Unmarshal(body, &st) == nil && (st.Message != "" || st.Kind == "Status") {
		if st.Code == 0 {
			st.Code = int32(httpCode)
		}
	} else {
		st = metav1.Status{Code: int32(httpCode), Message: text}
	}
	if st.Message == "" {
		st.Message = strings.TrimSpace(strings.TrimPrefix(httpStatus, strconv.Itoa(httpCode)))
		if st.Message == "" {
			st.Message = http.StatusText(httpCode)
		}
	}
	st.TypeMeta = metav1.TypeMeta{}
	st.Status = metav1.StatusFailure
	if st.Reason == "" {
		st.Reason = reasonForCode(int(st.Code))
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// reasonForCode is the metav1.StatusReason Kubernetes API servers send
// with an HTTP code, so apierrors' predicates recognise the error.
func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusNotAcceptable:
		return metav1.StatusReasonNotAcceptable
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusGone:
		return metav1.StatusReasonGone
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusUnsupportedMediaType:
		return metav1.StatusReasonUnsupportedMediaType
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusInternalServerError:
		return metav1.StatusReasonInternalError
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	}
	return metav1.StatusReasonUnknown
}
