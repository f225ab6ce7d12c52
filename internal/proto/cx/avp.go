package cx

import (
	"fmt"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// AVP lookup in go-diameter's Message.FindAVP matches on code only and searches inside grouped AVPs, so a lookup of
// Server-Name (602) can return the one nested in Server-Capabilities. Everything here walks one level and matches
// code and vendor.

func findAVP(list []*diam.AVP, code, vendor uint32) *diam.AVP {
	for _, a := range list {
		if a.Code == code && a.VendorID == vendor {
			return a
		}
	}
	return nil
}

func findAVPs(list []*diam.AVP, code, vendor uint32) []*diam.AVP {
	var out []*diam.AVP
	for _, a := range list {
		if a.Code == code && a.VendorID == vendor {
			out = append(out, a)
		}
	}
	return out
}

func groupOf(a *diam.AVP) ([]*diam.AVP, bool) {
	g, ok := a.Data.(*diam.GroupedAVP)
	if !ok {
		return nil, false
	}
	return g.AVP, true
}

func stringOf(a *diam.AVP) (string, bool) {
	switch v := a.Data.(type) {
	case datatype.UTF8String:
		return string(v), true
	case datatype.OctetString:
		return string(v), true
	case datatype.DiameterIdentity:
		return string(v), true
	case datatype.DiameterURI:
		return string(v), true
	}
	return "", false
}

func uint32Of(a *diam.AVP) (uint32, bool) {
	switch v := a.Data.(type) {
	case datatype.Unsigned32:
		return uint32(v), true
	case datatype.Enumerated:
		if int32(v) < 0 {
			return 0, false
		}
		return uint32(v), true
	case datatype.Integer32:
		if int32(v) < 0 {
			return 0, false
		}
		return uint32(v), true
	}
	return 0, false
}

// avpReader pulls typed values out of a list of AVPs and remembers the first problem as a RequestError with the
// Failed-AVP that RFC 6733 §7.5 asks for.
type avpReader struct {
	list []*diam.AVP
	err  *RequestError
}

func (r *avpReader) fail(res Result, a *diam.AVP, format string, args ...any) {
	if r.err != nil {
		return
	}
	r.err = &RequestError{Result: res, Message: fmt.Sprintf(format, args...)}
	if a != nil {
		r.err.Failed = []*diam.AVP{a}
	}
}

// missing records a missing mandatory AVP: Failed-AVP carries the code and vendor with a zero-filled payload.
func (r *avpReader) missing(name string, code, vendor uint32, zero datatype.Type) {
	flags := uint8(avp.Mbit)
	if vendor != 0 {
		flags |= avp.Vbit
	}
	r.fail(MissingAVP, diam.NewAVP(code, flags, vendor, zero), "missing AVP %s (%d)", name, code)
}

func (r *avpReader) str(name string, code, vendor uint32, required bool) string {
	a := findAVP(r.list, code, vendor)
	if a == nil {
		if required {
			r.missing(name, code, vendor, datatype.UTF8String(""))
		}
		return ""
	}
	s, ok := stringOf(a)
	if !ok {
		r.fail(InvalidAVPValue, a, "AVP %s (%d) has an unexpected type", name, code)
	}
	return s
}

func (r *avpReader) strs(name string, code, vendor uint32) []string {
	var out []string
	for _, a := range findAVPs(r.list, code, vendor) {
		s, ok := stringOf(a)
		if !ok {
			r.fail(InvalidAVPValue, a, "AVP %s (%d) has an unexpected type", name, code)
			continue
		}
		out = append(out, s)
	}
	return out
}

func (r *avpReader) u32(name string, code, vendor uint32, required bool) (uint32, bool) {
	a := findAVP(r.list, code, vendor)
	if a == nil {
		if required {
			r.missing(name, code, vendor, datatype.Unsigned32(0))
		}
		return 0, false
	}
	v, ok := uint32Of(a)
	if !ok {
		r.fail(InvalidAVPValue, a, "AVP %s (%d) has an invalid value", name, code)
		return 0, false
	}
	return v, true
}

// enum reads an enumerated AVP and checks it against the allowed maximum.
func (r *avpReader) enum(name string, code, vendor uint32, required bool, max uint32) (uint32, bool) {
	v, ok := r.u32(name, code, vendor, required)
	if ok && v > max {
		r.fail(InvalidAVPValue, findAVP(r.list, code, vendor), "AVP %s (%d) value %d is not defined", name, code, v)
		return 0, false
	}
	return v, ok
}

func (r *avpReader) group(name string, code, vendor uint32, required bool) ([]*diam.AVP, *diam.AVP) {
	a := findAVP(r.list, code, vendor)
	if a == nil {
		if required {
			r.missing(name, code, vendor, &diam.GroupedAVP{})
		}
		return nil, nil
	}
	g, ok := groupOf(a)
	if !ok {
		r.fail(InvalidAVPValue, a, "AVP %s (%d) is not grouped", name, code)
		return nil, a
	}
	return g, a
}

func (r *avpReader) time(name string, code, vendor uint32) time.Time {
	a := findAVP(r.list, code, vendor)
	if a == nil {
		return time.Time{}
	}
	t, ok := a.Data.(datatype.Time)
	if !ok {
		r.fail(InvalidAVPValue, a, "AVP %s (%d) is not a Time", name, code)
		return time.Time{}
	}
	return time.Time(t)
}

// sub returns a reader over a grouped AVP's children that reports into the same error slot.
func (r *avpReader) sub(list []*diam.AVP) *avpReader { return &avpReader{list: list, err: r.err} }

// merge copies a sub-reader's first error back.
func (r *avpReader) merge(s *avpReader) {
	if r.err == nil {
		r.err = s.err
	}
}

// Constructors for outgoing AVPs, with the flags of TS 29.229 table 6.3.0.1.

func mv(code uint32, d datatype.Type) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit|avp.Vbit, Vendor3GPP, d)
}
func v(code uint32, d datatype.Type) *diam.AVP  { return diam.NewAVP(code, avp.Vbit, Vendor3GPP, d) }
func m0(code uint32, d datatype.Type) *diam.AVP { return diam.NewAVP(code, avp.Mbit, VendorNone, d) }
func grp(avps ...*diam.AVP) *diam.GroupedAVP    { return &diam.GroupedAVP{AVP: avps} }

func utf8(s string) datatype.UTF8String { return datatype.UTF8String(s) }
