package access

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

// The ACL file: one principal a line,
//
//	# name     secret                rights      groups
//	sync-job   sha256:9f86d08…0a08   read,write  team-a/* team-b
//	dashboard  sha256:…              read        *
//	billing    mtls                  read        billing/*
//	ops        sha256:…              admin       *
//
// Blank lines and lines whose first character that is not a space is #
// are skipped. The fields are separated by spaces or tabs: the name (as
// scope.ValidatePrincipal says); the secret,
// SecretPrefix and the hex SHA-256 of the principal's token (HashToken),
// or mtls for a principal of a client certificate whose subject common
// name is the name; the rights, read, write or admin, or several joined by
// commas (the most counts: write reads too); and the groups, one or more,
// each an id, a prefix ending in * or * for every group, percent-escaped
// as a URL's path segment (team%20a for "team a", %2A for a * that ends an
// id). An admin's groups are *.

// MaxFileBytes bounds an ACL file: a line is about 100 bytes, so this
// holds some ten thousand principals.
const MaxFileBytes = 1 << 20

// mtlsSecret is the secret field of a principal of a client certificate.
const mtlsSecret = "mtls"

// Parse returns the principals of text, an ACL file's content; file names
// it in errors, each of which gives the file, the line and why, and never
// a secret.
func Parse(file string, text []byte) ([]*Principal, error) {
	if len(text) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than an ACL file may have (%d)", file, len(text), MaxFileBytes)
	}
	var principals []*Principal
	for i, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", file, i+1)
		p, err := parseLine(fields)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		p.where = where
		principals = append(principals, p)
	}
	if len(principals) == 0 {
		return nil, fmt.Errorf("%s: no principal: an ACL file gives one a line, name secret rights groups (is the file the one meant?)", file)
	}
	return principals, nil
}

// parseLine returns the principal of a line's fields.
func parseLine(fields []string) (*Principal, error) {
	if len(fields) < 4 {
		return nil, fmt.Errorf("%d fields, not name, secret, rights and groups", len(fields))
	}
	name, secret, rights, patterns := fields[0], fields[1], fields[2], fields[3:]
	if err := checkName(name); err != nil {
		return nil, err
	}
	p := &Principal{Name: name}
	if secret == mtlsSecret {
		p.mtls = true
	} else if err := p.setHash(secret); err != nil {
		return nil, err
	}
	right, err := parseRights(rights)
	if err != nil {
		return nil, err
	}
	groups, err := parseGroups(patterns)
	if err != nil {
		return nil, err
	}
	if right == scope.Admin && !groups.All() {
		return nil, errors.New("admin is every group: give * as its groups")
	}
	p.Scope = scope.New(name, right, groups)
	return p, nil
}

// checkName returns an error unless name can be a principal's name in
// an ACL file: as scope.ValidatePrincipal says, and not the token's.
func checkName(name string) error {
	if err := scope.ValidatePrincipal(name); err != nil {
		return err
	}
	if name == TokenPrincipalName {
		return fmt.Errorf("the name %s is the principal of -token-file and MEMBERSHIP_TOKEN: give this one another", name)
	}
	return nil
}

// setHash sets p's hash from secret, an ACL file's secret field, which
// the error never shows: a token pasted there by mistake must not reach
// the log.
func (p *Principal) setHash(secret string) error {
	digits, ok := strings.CutPrefix(secret, SecretPrefix)
	if ok && len(digits) == hex.EncodedLen(len(p.hash)) {
		if _, err := hex.Decode(p.hash[:], []byte(digits)); err == nil {
			return nil
		}
	}
	return errors.New("malformed secret: a secret is sha256: and 64 hex digits (membership -hash-token prints it), or mtls")
}

// parseRights returns the most of the rights field's rights.
func parseRights(field string) (scope.Right, error) {
	var most scope.Right
	for name := range strings.SplitSeq(field, ",") {
		var r scope.Right
		switch name {
		case "read":
			r = scope.Read
		case "write":
			r = scope.Write
		case "admin":
			r = scope.Admin
		default:
			return 0, fmt.Errorf("unknown right %.40q: the rights are read, write and admin, joined by commas", name)
		}
		most = max(most, r)
	}
	return most, nil
}

// parseGroups returns the set of the groups fields: each is unescaped,
// and one that ends in a * as written (not %2A) is a prefix. Each must be
// a group id (membership.ValidateGroupID), or the start of one.
func parseGroups(fields []string) (groupids.Set, error) {
	var exact, prefixes []string
	for _, f := range fields {
		raw, isPrefix := strings.CutSuffix(f, "*")
		id, err := url.PathUnescape(raw)
		if err != nil {
			return groupids.Set{}, fmt.Errorf("group %.70q is not percent-escaped right: %v", f, err)
		}
		if err := membership.ValidateGroupID(id); err != nil && (!isPrefix || id != "") {
			return groupids.Set{}, fmt.Errorf("group %.70q: %s", f, membership.ErrorMessage(err))
		}
		if isPrefix {
			prefixes = append(prefixes, id)
		} else {
			exact = append(exact, id)
		}
	}
	return groupids.New(exact, prefixes), nil
}
