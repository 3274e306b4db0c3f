package daemon

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// bucketOTLP holds the records not yet acknowledged by the OTLP collector,
// in the order they were stored: sequence → otlpPending. A checkpoint adds
// them in the transaction that stores the records, so a record is pending
// exactly when it is stored and not yet sent.
var bucketOTLP = []byte("otlp_pending")

// otlpPending names a pending record: its kind ("termination" or
// "startup"), its key in that bucket and its record id.
type otlpPending struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	ID   string `json:"id"`
}

// putOTLPPending marks the records of a checkpoint pending.
func putOTLPPending(tx *bolt.Tx, ts []correlate.Termination, ss []correlate.Startup) error {
	if len(ts) == 0 && len(ss) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketOTLP)
	if err != nil {
		return err
	}
	put := func(p otlpPending) error {
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		v, _ := json.Marshal(p)
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), v)
	}
	for _, t := range ts {
		err = errors.Join(err, put(otlpPending{Kind: "termination", Key: t.Key(), ID: otlp.TerminationID(t)}))
	}
	for _, s := range ss {
		err = errors.Join(err, put(otlpPending{Kind: "startup", Key: s.PodUID, ID: otlp.StartupID(s)}))
	}
	return err
}

// otlpSource is the store as the OTLP exporter's Source.
type otlpSource struct {
	s    *Store
	node string
}

// Pending reads the n oldest pending records; a pending record whose
// record was pruned meanwhile (or cannot be read) is forgotten and counted
// as expired.
func (o otlpSource) Pending(n int) (entries []otlp.Entry, expired int, err error) {
	var gone [][]byte
	err = o.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOTLP)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(entries) < n; k, v = c.Next() {
			var p otlpPending
			var e otlp.Entry
			ok := json.Unmarshal(v, &p) == nil && len(k) == 8
			if ok {
				e, ok = o.entry(tx, p)
			}
			if !ok {
				gone = append(gone, append([]byte(nil), k...))
				continue
			}
			e.Seq = binary.BigEndian.Uint64(k)
			entries = append(entries, e)
		}
		return nil
	})
	if err == nil && len(gone) > 0 {
		err = o.s.db.Update(func(tx *bolt.Tx) error { return deleteKeys(tx.Bucket(bucketOTLP), gone) })
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the records pending for OTLP: %w", err)
	}
	return entries, len(gone), nil
}

// entry reads a pending record's record; false when it is gone.
func (o otlpSource) entry(tx *bolt.Tx, p otlpPending) (otlp.Entry, bool) {
	switch p.Kind {
	case "termination":
		v := tx.Bucket(bucketTerminations).Get([]byte(p.Key))
		var t correlate.Termination
		if v == nil || json.Unmarshal(v, &t) != nil || otlp.TerminationID(t) != p.ID {
			return otlp.Entry{}, false
		}
		return otlp.Termination(t), true
	case "startup":
		v := tx.Bucket(bucketStartups).Get([]byte(p.Key))
		var s correlate.Startup
		if v == nil || json.Unmarshal(v, &s) != nil || otlp.StartupID(s) != p.ID {
			return otlp.Entry{}, false
		}
		return otlp.Startup(s, o.node), true
	}
	return otlp.Entry{}, false
}

// Acknowledge forgets the pending records of entries, by their Seq.
func (o otlpSource) Acknowledge(entries []otlp.Entry) error {
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		keys[i] = binary.BigEndian.AppendUint64(nil, e.Seq)
	}
	return o.s.db.Update(func(tx *bolt.Tx) error { return deleteKeys(tx.Bucket(bucketOTLP), keys) })
}

func deleteKeys(b *bolt.Bucket, keys [][]byte) error {
	if b == nil {
		return nil
	}
	var err error
	for _, k := range keys {
		err = errors.Join(err, b.Delete(k))
	}
	return err
}
