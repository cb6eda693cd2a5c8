package openaibatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/batchagent/batchagent/server"
)

// writeResults writes the output and error lines of api's files outputID
// and errorID to out in the order of the input file (each file is in
// input order already: this merges them by the input's custom_ids),
// through a temporary file renamed at the end.
func writeResults(api http.Handler, input, out, outputID, errorID string) error {
	in, err := os.Open(input)
	if err != nil {
		return err
	}
	defer in.Close()
	outs, closeOuts := fileReader(api, outputID)
	defer closeOuts.Close()
	errs, closeErrs := fileReader(api, errorID)
	defer closeErrs.Close()
	type head struct {
		sc   *bufio.Scanner
		line []byte
		id   string
		ok   bool
	}
	advance := func(h *head) {
		h.ok = h.sc.Scan()
		if h.ok {
			h.line = bytes.Clone(h.sc.Bytes())
			var l struct {
				CustomID string `json:"custom_id"`
			}
			json.Unmarshal(h.line, &l)
			h.id = l.CustomID
		}
	}
	heads := []*head{{sc: outs}, {sc: errs}}
	for _, h := range heads {
		advance(h)
	}
	tmp := out + ".tmp"
	of, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	bw := bufio.NewWriter(of)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), server.DefaultMaxBodyBytes+64<<10)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if len(bytes.TrimSpace(sc.Bytes())) == 0 || json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		for _, h := range heads {
			if h.ok && h.id == l.CustomID {
				bw.Write(h.line)
				bw.WriteByte('\n')
				advance(h)
				break
			}
		}
	}
	for _, h := range heads {
		if h.ok {
			of.Close()
			return fmt.Errorf("result %s is not in the input's order", h.id)
		}
		if err := h.sc.Err(); err != nil {
			of.Close()
			return err
		}
	}
	if err := errors.Join(sc.Err(), bw.Flush(), of.Sync()); err != nil {
		of.Close()
		return err
	}
	if err := of.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
