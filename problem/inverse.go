package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Parse reads a problem document back (the inverse of the table, for clients
// such as the order side's HTTP completer): code is the document's "code"
// member, else its "reason" member, else its type URI's last segment ('-'
// read as '_'), whichever first names a row of the table; failing all three
// (a document from a proxy, or no document), the code the status most
// plausibly means: 410 expired, 409 completed, 404 not_found, 429/502/503/504
// unavailable, anything else internal. message is the detail, else the
// title, else "answered <status>".
func Parse(status int, body []byte) (code, message string) {
	var d Details
	_ = json.Unmarshal(body, &d)
	message = d.Detail
	if message == "" {
		message = d.Title
	}
	if message == "" {
		message = "answered " + strconv.Itoa(status)
	}
	for _, cand := range []string{d.Code, d.Reason, d.Type[strings.LastIndexAny(d.Type, "/#")+1:]} {
		c := strings.ReplaceAll(strings.ToLower(cand), "-", "_")
		if c != "" && Known(c) {
			return c, message
		}
	}
	switch status {
	case http.StatusGone:
		return "expired", message
	case http.StatusConflict:
		return "completed", message
	case http.StatusNotFound:
		return "not_found", message
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return unavailable, message
	}
	return internal, message
}
