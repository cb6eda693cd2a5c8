package config

import (
	"fmt"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// A key is one key of a mapping of the job file and where its value goes:
// a pointer to a field of the engine's own types (job.Def,
// batchagent.Config, a tool's config), decoded by the field's type; a
// table of keys, for a nested mapping; or a [field] that decodes itself.
// The same table encodes a Job back to YAML.
type key struct {
	name string
	dst  any
}

// keys is the table of a mapping's keys.
type keys []key

// find returns the key named name.
func (ks keys) find(name string) (key, bool) {
	for _, k := range ks {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// names returns the names of the keys, in order.
func (ks keys) names() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.name
	}
	return out
}

// A field is a destination that decodes and encodes itself: a value with a
// word such as "off", or a mapping whose keys depend on its content.
type field interface {
	// decode decodes n, which is not null, at path.
	decode(d *decoder, n *yaml.Node, path string)
	// encode returns what to write for the field, or nil when it is unset.
	encode() (any, error)
}

// tabled is a struct decoded by a table of its keys.
type tabled interface {
	keys() keys
}

// into decodes n at path into dst, a pointer, a table of keys or a field.
// A null value keeps the destination as it is.
func (d *decoder) into(n *yaml.Node, path string, dst any) {
	if !d.visit(n, path, 1) {
		return
	}
	d.follow(n, path, func(n *yaml.Node) {
		d.nodes[path] = n
		if isNull(n) {
			return // absent: keep the zero value, or the default
		}
		d.decode(n, path, dst)
	})
}

// decode decodes the non-null n into dst.
func (d *decoder) decode(n *yaml.Node, path string, dst any) {
	switch dst := dst.(type) {
	case keys:
		d.table(n, path, dst)
		return
	case field:
		dst.decode(d, n, path)
		return
	case tabled:
		d.table(n, path, dst.keys())
		return
	}
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	switch {
	case t == timeDurationType:
		var dur Duration
		if err := dur.UnmarshalYAML(n); err != nil {
			d.problem(n, path, "%v", err)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decode(n, path, p.Interface())
		v.Set(p)
	case t.Kind() == reflect.Slice:
		d.sequence(n, path, v)
	default:
		d.scalar(n, path, v)
	}
}

// table decodes the mapping n with the table ks.
func (d *decoder) table(n *yaml.Node, path string, ks keys) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	for _, e := range d.entries(n, path) {
		k, ok := ks.find(e.key.Value)
		if !ok {
			d.unknownKey(e.key, path, ks.names())
			continue
		}
		d.into(e.value, join(path, k.name), k.dst)
	}
}

// unknownKey reports the unknown key k of the mapping at path, with a
// suggestion among known for a near miss.
func (d *decoder) unknownKey(k *yaml.Node, path string, known []string) {
	msg := fmt.Sprintf("unknown key %s", quote(k.Value))
	if s := suggest(k.Value, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	d.report(k, join(path, k.Value), "%s", msg)
}

// encodeTable returns the mapping of the keys of ks that are set, or nil
// when none is.
func encodeTable(ks keys) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range ks {
		v, err := encodeValue(k.dst)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		if v == nil {
			continue
		}
		vn, ok := v.(*yaml.Node)
		if !ok {
			vn = new(yaml.Node)
			if err := vn.Encode(v); err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k.name}, vn)
	}
	if len(m.Content) == 0 {
		return nil, nil
	}
	return m, nil
}

// encodeValue returns what to write for dst, or nil when it is unset (its
// zero value).
func encodeValue(dst any) (any, error) {
	switch dst := dst.(type) {
	case keys:
		return nilNode(encodeTable(dst))
	case field:
		return dst.encode()
	case tabled:
		return nilNode(encodeTable(dst.keys()))
	}
	v := reflect.ValueOf(dst).Elem()
	if v.IsZero() {
		return nil, nil
	}
	switch t := v.Type(); {
	case t == timeDurationType:
		return time.Duration(v.Int()).String(), nil
	case t.Kind() == reflect.Slice:
		items := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			item, err := encodeValue(v.Index(i).Addr().Interface())
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			n, ok := item.(*yaml.Node)
			if !ok {
				n = new(yaml.Node)
				if err := n.Encode(item); err != nil {
					return nil, fmt.Errorf("[%d]: %w", i, err)
				}
			}
			items.Content = append(items.Content, n)
		}
		return items, nil
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		return encodeValue(v.Interface())
	}
	return v.Interface(), nil
}

// nilNode returns nil for a nil node, so that an empty table is unset.
func nilNode(n *yaml.Node, err error) (any, error) {
	if n == nil || err != nil {
		return nil, err
	}
	return n, nil
}

// offWord is the word that turns a setting off, where a setting can be.
const offWord = "off"

// offInt is an integer setting that the word "off" turns off: it sets
// *off, or, where the engine's type has no flag, *v to offValue. For old
// files, -1 means off too (deprecated), where minusOne is set. zeroOff
// makes 0 mean off too (max_retries: 0 has always meant no retries).
type offInt struct {
	v        *int
	off      *bool // nil: off is *v == offValue
	offValue int
	minusOne bool
	zeroOff  bool
}

func (o offInt) setOff() {
	if o.off != nil {
		*o.off = true
		*o.v = 0
		return
	}
	*o.v = o.offValue
}

func (o offInt) isOff() bool {
	if o.off != nil {
		return *o.off
	}
	return *o.v == o.offValue
}

func (o offInt) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if n.Value != offWord {
			d.problem(n, path, "expected an integer or %s, got %s", offWord, describe(n))
			return
		}
		o.setOff()
		return
	}
	var v int
	d.scalar(n, path, reflect.ValueOf(&v).Elem())
	if !d.ok(path) {
		return
	}
	switch {
	case v == -1 && o.minusOne:
		o.setOff() // deprecated spelling of off
	case v < 0:
		alt := ""
		if o.minusOne {
			alt = " (-1, deprecated, means off too)"
		}
		d.report(n, path, "must be %s or not negative%s, got %d", offWord, alt, v)
	case v == 0 && o.zeroOff:
		o.setOff()
	default:
		*o.v = v
	}
}

func (o offInt) encode() (any, error) {
	switch {
	case o.isOff():
		return offWord, nil
	case *o.v == 0:
		return nil, nil
	}
	return *o.v, nil
}

// offDuration is a duration setting that the word "off" turns off, by
// setting *off; without off, "off" is zero, the setting's default.
type offDuration struct {
	v   *time.Duration
	off *bool
}

func (o offDuration) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == offWord {
		*o.v = 0
		if o.off != nil {
			*o.off = true
		}
		return
	}
	var dur Duration
	if err := dur.UnmarshalYAML(n); err != nil {
		d.problem(n, path, "%v, or %s", err, offWord)
		return
	}
	*o.v = time.Duration(dur)
}

func (o offDuration) encode() (any, error) {
	switch {
	case o.off != nil && *o.off:
		return offWord, nil
	case *o.v == 0:
		return nil, nil
	}
	return o.v.String(), nil
}

// defaultBool is a boolean setting whose default, def, is filled before
// decoding; it is written only when it differs.
type defaultBool struct {
	v   *bool
	def bool
}

func (b defaultBool) decode(d *decoder, n *yaml.Node, path string) {
	d.scalar(n, path, reflect.ValueOf(b.v).Elem())
}

func (b defaultBool) encode() (any, error) {
	if *b.v == b.def {
		return nil, nil
	}
	return *b.v, nil
}
