package console

import (
	"fmt"
	"net"
	"strings"
)

// allowedHost is an entry of Options.AllowedHosts: a host name or
// address in lower case and, when the entry had one, a port.
type allowedHost struct {
	host string
	port string // "" matches any port
}

// parseHosts checks and normalizes Options.AllowedHosts.
func parseHosts(entries []string) ([]allowedHost, error) {
	out := make([]allowedHost, 0, len(entries))
	for _, e := range entries {
		host, port, err := splitHost(e)
		if err != nil || host == "" || strings.ContainsAny(host, " /?#@") {
			return nil, fmt.Errorf("console: AllowedHosts entry %q must be a host name or address, with or without :port", e)
		}
		out = append(out, allowedHost{host: host, port: port})
	}
	return out, nil
}

// splitHost splits a Host header value, or an AllowedHosts entry, into
// its host, in lower case and without brackets, and its port ("" when it
// has none).
func splitHost(s string) (host, port string, err error) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return strings.ToLower(h), p, nil
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	if strings.Contains(s, ":") && net.ParseIP(s) == nil {
		return "", "", fmt.Errorf("bad host %q", s)
	}
	return strings.ToLower(s), "", nil
}

// allowedHost reports whether the console answers a request for the Host
// header value h: always when Options.AllowedHosts is empty. A Host
// without a port is HTTP's default port, 80 (443 with TLS is the
// proxy's business: name the host without a port).
func (c *console) allowedHost(h string) bool {
	if len(c.opts.AllowedHosts) == 0 {
		return true
	}
	host, port, err := splitHost(h)
	if err != nil || host == "" {
		return false
	}
	if port == "" {
		port = "80"
	}
	for _, a := range c.hosts {
		if a.host == host && (a.port == "" || a.port == port) {
			return true
		}
	}
	return false
}
