package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/batchagent/batchagent/job"
	"github.com/batchagent/batchagent/llm"
)

// MediaConfig is the job file's media key: where the media of a task's
// image, audio and file items may come from.
type MediaConfig struct {
	// Roots are the absolute directories a path reference may name files
	// under (relative ones in the file are resolved against the job
	// file's directory; each must be a directory). A job whose task has
	// media items and no media key gets the job file's directory.
	Roots []string
	// MaxBytes caps one media item's bytes. Zero means the loader's
	// default (20 MiB). The file writes a size: "20MB", "512KiB", or an
	// integer of bytes.
	MaxBytes int64
	// Fetch lists the host patterns ("cdn.example.com",
	// "*.example.com") whose https URLs may be fetched or passed on.
	Fetch []string
	// PassURLs sends https URLs to the provider, which fetches them,
	// instead of fetching them here.
	PassURLs bool
}

func (c *MediaConfig) keys() keys {
	return keys{
		{"roots", &c.Roots},
		{"max_bytes", sizeField{&c.MaxBytes}},
		{"fetch", &c.Fetch},
		{"pass_urls", &c.PassURLs},
	}
}

// validateMedia resolves the media roots and checks them, and gives a job
// with media items and no media key the job file's directory as its root.
func (d *decoder) validateMedia(j *Job) {
	if len(j.Def.Media) == 0 && j.Media == nil {
		return
	}
	if j.Media == nil {
		j.Media = &MediaConfig{Roots: []string{j.Dir}}
		return
	}
	if !d.ok("media.roots") {
		return
	}
	for k, r := range j.Media.Roots {
		path := fmt.Sprintf("media.roots[%d]", k)
		if r == "" {
			d.report(d.at(path), path, "must not be empty")
			continue
		}
		j.Media.Roots[k] = d.resolve(r)
		d.checkRoot(j.Media.Roots[k], path)
	}
}

// taskField is the task key: a template string, or a list of parts —
// text items, joined with a blank line into the task, and image, audio
// and file items, media placed after the text in order.
type taskField struct {
	task  *string
	media *[]job.MediaField
}

// mediaKinds are the keys of a task's media items, and their kinds.
var mediaKinds = map[string]llm.PartKind{"image": llm.PartImage, "audio": llm.PartAudio, "file": llm.PartFile}

// taskItemKeys are the keys a task item may have.
var taskItemKeys = []string{"text", "image", "audio", "file", "detail"}

func (f taskField) decode(d *decoder, n *yaml.Node, path string) {
	switch {
	case n.Kind == yaml.MappingNode:
		d.problem(n, path, "expected a string, or a list of text, image, audio and file items, got %s", describe(n))
		return
	case n.Kind != yaml.SequenceNode:
		d.scalar(n, path, reflect.ValueOf(f.task).Elem())
		return
	}
	if len(n.Content) == 0 {
		d.problem(n, path, "must not be an empty list (want text, image, audio or file items)")
		return
	}
	reported := len(d.problems)
	var texts []string
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			d.problem(item, ip, "expected a mapping with one of text, image, audio or file, got %s", describe(item))
			continue
		}
		var kind, value string
		var detail *yaml.Node
		var kindNode *yaml.Node
		for _, e := range d.entries(item, ip) {
			k := e.key.Value
			switch {
			case k == "detail":
				detail = e.value
				continue
			case k != "text" && mediaKinds[k] == "":
				d.unknownKey(e.key, ip, taskItemKeys)
				d.bad[ip] = true
				continue
			case kind != "":
				d.problem(e.key, ip, "has both %s and %s: want one per item", kind, k)
				continue
			}
			if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!str" {
				d.problem(e.value, join(ip, k), "expected a string, got %s", describe(e.value))
				continue
			}
			kind, value, kindNode = k, e.value.Value, e.value
		}
		if !d.ok(ip) {
			continue
		}
		switch {
		case kind == "":
			d.problem(item, ip, "want one of text, image, audio or file")
			continue
		case detail != nil && kind != "image":
			d.problem(detail, join(ip, "detail"), "detail is for image items only")
			continue
		case value == "":
			d.problem(kindNode, join(ip, kind), "must not be empty")
			continue
		}
		if kind == "text" {
			texts = append(texts, value)
			continue
		}
		d.checkTemplate(kindNode, join(ip, kind), value)
		mf := job.MediaField{Kind: mediaKinds[kind], Ref: value}
		if detail != nil {
			switch detail.Value {
			case "low", "high", "auto":
				mf.Detail = detail.Value
			default:
				d.problem(detail, join(ip, "detail"), "expected low, high or auto, got %s", describe(detail))
				continue
			}
		}
		*f.media = append(*f.media, mf)
	}
	if len(d.problems) > reported {
		d.bad[path] = true // reported at the items: no check of the task as a whole
		return
	}
	*f.task = strings.Join(texts, "\n\n")
}

func (f taskField) encode() (any, error) {
	if len(*f.media) == 0 {
		if *f.task == "" {
			return nil, nil
		}
		return *f.task, nil
	}
	var items []map[string]string
	if *f.task != "" {
		items = append(items, map[string]string{"text": *f.task})
	}
	for _, m := range *f.media {
		item := map[string]string{string(m.Kind): m.Ref}
		if m.Detail != "" {
			item["detail"] = m.Detail
		}
		items = append(items, item)
	}
	return items, nil
}

// sizeField is a size in bytes: an integer, or a string such as "20MB"
// (KB, MB, GB: powers of 1000) or "512KiB" (KiB, MiB, GiB: powers of
// 1024). Zero means unset.
type sizeField struct{ v *int64 }

func (f sizeField) decode(d *decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode {
		d.problem(n, path, `expected a size like "20MB", got %s`, describe(n))
		return
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		d.problem(n, path, "%v", err)
		return
	}
	*f.v = v
}

func (f sizeField) encode() (any, error) {
	if *f.v == 0 {
		return nil, nil
	}
	return *f.v, nil
}

// sizeUnits are the units of [ParseSize], longest first.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// ParseSize parses a size in bytes: an integer, or a number with a unit,
// "20MB" (KB, MB, GB: powers of 1000), "512KiB" (KiB, MiB, GiB: powers
// of 1024) or "100B". It must not be negative.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(t, u.name); ok {
			t, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf(`invalid size %q: want bytes, or a number with KB, MB, GB, KiB, MiB or GiB, like "20MB"`, s)
	case v < 0:
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	case v > math.MaxInt64/mult:
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return v * mult, nil
}
