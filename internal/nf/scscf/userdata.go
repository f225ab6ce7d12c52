package scscf

import "encoding/xml"

// publicIdentities reads the public identities of an IMSSubscription User-Data document.
func publicIdentities(userData []byte) []string {
	if len(userData) == 0 {
		return nil
	}
	var doc struct {
		IMPUs []string `xml:"ServiceProfile>PublicIdentity>Identity"`
	}
	if err := xml.Unmarshal(userData, &doc); err != nil {
		return nil
	}
	return doc.IMPUs
}
