package store

import (
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// maxGenerateCount bounds one generate range, so a typo cannot allocate millions of subscribers.
const maxGenerateCount = 1_000_000

// File is a YAML provisioning file: an explicit list of subscribers and ranges of generated test subscribers.
//
//	subscribers:
//	  - impi: alice@ims.test
//	    impus: [sip:alice@ims.test, tel:+15550001]
//	    password: secret
//	    realm: ims.test
//	generate:
//	  - {prefix: user, from: 1, count: 1000, digits: 4, domain: ims.test, password_prefix: pass}
type File struct {
	Listed []Subscriber `yaml:"subscribers"`
	Ranges []Range      `yaml:"generate"`
}

// Range generates Count subscribers <prefix><n>@<domain> for n = From … From+Count-1, n zero-padded to Digits,
// with IMPU sip:<prefix><n>@<domain>, realm Domain and password <password_prefix><n>.
type Range struct {
	Prefix         string `yaml:"prefix"`
	From           int    `yaml:"from"`
	Count          int    `yaml:"count"`
	Digits         int    `yaml:"digits"`
	Domain         string `yaml:"domain"`
	PasswordPrefix string `yaml:"password_prefix"`
}

// LoadFile reads a provisioning file strictly: unknown fields are errors naming the field and its line.
// Call File.Subscribers to expand and check it.
func LoadFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("store: load %s: %w", path, err)
	}
	defer f.Close()
	file, err := ParseFile(f)
	if err != nil {
		return File{}, fmt.Errorf("store: load %s: %w", path, err)
	}
	return file, nil
}

// ParseFile decodes a provisioning file from r, like LoadFile. An empty document is an empty File.
func ParseFile(r io.Reader) (File, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var file File
	if err := dec.Decode(&file); err != nil {
		if errors.Is(err, io.EOF) {
			return File{}, nil
		}
		return File{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("%w: only one YAML document is allowed", ErrInvalid)
	}
	return file, nil
}

// Subscribers expands the file (listed subscribers first, then each range in order), normalizes and validates
// every subscriber, and rejects an IMPI or IMPU that occurs twice, naming both places.
func (f File) Subscribers() ([]Subscriber, error) {
	type origin struct{ where, impi string }
	var (
		out   []Subscriber
		impis = map[string]origin{}
		impus = map[string]origin{}
	)
	add := func(at string, s Subscriber) error {
		s.Normalize()
		if err := s.Validate(); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if o, dup := impis[s.IMPI]; dup {
			return fmt.Errorf("%s: impi %q is also defined by %s: %w", at, s.IMPI, o.where, ErrInvalid)
		}
		impis[s.IMPI] = origin{at, s.IMPI}
		for k, u := range s.IMPUs {
			if o, dup := impus[u]; dup {
				return fmt.Errorf("%s: subscriber %q: impus[%d] %q is also used by %s (impi %q): %w",
					at, s.IMPI, k, u, o.where, o.impi, ErrInvalid)
			}
			impus[u] = origin{at, s.IMPI}
		}
		out = append(out, s)
		return nil
	}
	for i, s := range f.Listed {
		if err := add(fmt.Sprintf("subscribers[%d]", i), s.clone()); err != nil {
			return nil, err
		}
	}
	for i, r := range f.Ranges {
		at := fmt.Sprintf("generate[%d]", i)
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		for _, s := range Generate(r.Prefix, r.From, r.Count, r.Digits, r.Domain, r.PasswordPrefix) {
			if err := add(at, s); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (r Range) validate() error {
	bad := func(field, reason string) error { return fmt.Errorf("%s: %s: %w", field, reason, ErrInvalid) }
	switch {
	case r.Prefix == "":
		return bad("prefix", "required")
	case r.From < 0:
		return bad("from", "must be >= 0")
	case r.Count <= 0 || r.Count > maxGenerateCount:
		return bad("count", fmt.Sprintf("must be between 1 and %d", maxGenerateCount))
	case r.Digits < 0 || r.Digits > 18:
		return bad("digits", "must be between 0 and 18")
	case r.Domain == "":
		return bad("domain", "required")
	case r.PasswordPrefix == "":
		return bad("password_prefix", "required")
	}
	return nil
}

// Generate returns count normalized test subscribers: IMPI <prefix><n>@<domain>, IMPU sip:<prefix><n>@<domain>,
// realm domain, HA1 of the password <passwordPrefix><n>, for n = from … from+count-1 zero-padded to digits.
// It does not validate; a count <= 0 gives nil.
func Generate(prefix string, from, count, digits int, domain, passwordPrefix string) []Subscriber {
	if count <= 0 {
		return nil
	}
	subs := make([]Subscriber, 0, count)
	for n := from; n < from+count; n++ {
		num := fmt.Sprintf("%0*d", digits, n)
		user := prefix + num
		s := Subscriber{
			IMPI:     user + "@" + domain,
			IMPUs:    []string{"sip:" + user + "@" + domain},
			Realm:    domain,
			Password: passwordPrefix + num,
		}
		s.Normalize()
		subs = append(subs, s)
	}
	return subs
}

// DefaultLabSubscriberCount is how many lab subscribers the HSS provisions by default (user0001…user1000).
const DefaultLabSubscriberCount = 1000

// MaxLabSubscriberCount bounds the lab's population: user0001 … user999999 (the numbers keep at least four
// digits, so user0001…user9999 are unchanged and user10000 follows user9999).
const MaxLabSubscriberCount = 999_999

// DefaultLabSubscribers returns the default lab's test subscribers: user0001@ims.test … user1000@ims.test with
// IMPU sip:userNNNN@ims.test, realm ims.test and password passNNNN.
func DefaultLabSubscribers() []Subscriber {
	return LabSubscribers(DefaultLabSubscriberCount)
}

// LabSubscribers returns the lab's test subscribers user0001@ims.test … user<count>@ims.test (IMPU
// sip:userN@ims.test, password passN, N zero-padded to at least four digits: user0001, user9999, user10000,
// user100000). A count <= 0 gives nil.
func LabSubscribers(count int) []Subscriber {
	return Generate("user", 1, count, 4, "ims.test", "pass")
}
