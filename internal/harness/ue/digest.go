package ue

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SIP Digest (RFC 2617 / RFC 3261 §22, MD5 with qop=auth) as the S-CSCF asks for it with a 401 to REGISTER.

var errNoChallenge = errors.New("no usable Digest challenge (MD5) in WWW-Authenticate")

// challenge is a parsed WWW-Authenticate: Digest ... value.
type challenge struct {
	realm, nonce, opaque, algorithm string
	qopAuth                         bool // the server offers qop=auth
	qopOnly                         bool // the server offers qop, but not auth (auth-int only)
}

// parseChallenges returns the first MD5 Digest challenge among the header values.
func parseChallenges(values []string) (challenge, error) {
	for _, v := range values {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
		if !strings.EqualFold(scheme, "Digest") {
			continue
		}
		params := parseAuthParams(rest)
		c := challenge{realm: params["realm"], nonce: params["nonce"], opaque: params["opaque"],
			algorithm: params["algorithm"]}
		if c.algorithm != "" && !strings.EqualFold(c.algorithm, "MD5") {
			continue
		}
		if q, ok := params["qop"]; ok {
			for _, o := range strings.Split(q, ",") {
				if strings.EqualFold(strings.TrimSpace(o), "auth") {
					c.qopAuth = true
				}
			}
			c.qopOnly = !c.qopAuth
		}
		if c.qopOnly {
			continue
		}
		return c, nil
	}
	return challenge{}, errNoChallenge
}

// parseAuthParams splits `k=v, k="quoted, value"` into a map (keys lower-cased).
func parseAuthParams(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t,")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			break
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			val = b.String()
			s = s[min(i+1, len(s)):]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val = strings.TrimSpace(s[:end])
			s = s[end:]
		}
		out[key] = val
	}
	return out
}

// emptyAuthorization is the IMS first REGISTER's Authorization: the private identity and no response yet.
func emptyAuthorization(impi, realm, uri string) string {
	return fmt.Sprintf(`Digest username="%s", realm="%s", nonce="", uri="%s", response=""`, impi, realm, uri)
}

// digestAuthorization answers the challenge for method and uri with nonce count 1 and a fresh cnonce.
func digestAuthorization(c challenge, impi, password, method, uri string) string {
	ha1 := md5hex(impi + ":" + c.realm + ":" + password)
	ha2 := md5hex(method + ":" + uri)
	var b strings.Builder
	fmt.Fprintf(&b, `Digest username="%s", realm="%s", nonce="%s", uri="%s"`, impi, c.realm, c.nonce, uri)
	if c.qopAuth {
		const nc = "00000001"
		cnonce := newCnonce()
		fmt.Fprintf(&b, `, response="%s", algorithm=MD5, cnonce="%s", qop=auth, nc=%s`,
			md5hex(ha1+":"+c.nonce+":"+nc+":"+cnonce+":auth:"+ha2), cnonce, nc)
	} else {
		fmt.Fprintf(&b, `, response="%s", algorithm=MD5`, md5hex(ha1+":"+c.nonce+":"+ha2))
	}
	if c.opaque != "" {
		fmt.Fprintf(&b, `, opaque="%s"`, c.opaque)
	}
	return b.String()
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func newCnonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
